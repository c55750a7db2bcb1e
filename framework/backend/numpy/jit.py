"""Compiling generated kernel source with numba, cached on disk, when numba is installed (``gradgen[fast]``).

The source of a fused kernel is written once to a file named by its hash under
the cache folder (``$GRADGEN_CACHE_DIR``, else ``$XDG_CACHE_HOME/gradgen`` or
``~/.cache/gradgen``), imported as a module, and jitted with ``cache=True``: numba
keeps the machine code beside the file, so a fresh process loads it instead of
compiling again. The file is never rewritten (numba keys its cache on the
file's stamp). Without numba, ``AVAILABLE`` is False and the plan does not fuse.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from types import ModuleType

__all__ = ["AVAILABLE", "cache_dir", "load_source", "module_head"]

AVAILABLE = importlib.util.find_spec("numba") is not None
"""Whether fused elementwise kernels can be compiled here."""

_loaded: dict[str, ModuleType] = {}

_HEAD = """import math
import numba
import numpy as np

lit = np.{dtype}


@numba.njit(cache=True, error_model="numpy", fastmath=False)
"""


def module_head(dtype: str) -> str:
    """The start of a generated module whose ``kernel`` follows: imports, ``lit`` (a constant of ``dtype``) and
    the jit decorator. ``error_model="numpy"`` makes division IEEE's, as numpy's kernels do (x / 0 is inf or
    nan, never ZeroDivisionError); ``fastmath`` stays off, so NaN and inf propagate and nothing is reordered."""
    return _HEAD.format(dtype=dtype)


def cache_dir() -> str:
    """The folder generated kernels and their compiled code live in."""
    base = os.environ.get("GRADGEN_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "gradgen")
    return os.path.join(base, "fused")


def load_source(source: str) -> ModuleType:
    """The module made from ``source`` (which imports numba itself), from the disk cache when it is there."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:24]
    module = _loaded.get(digest)
    if module is not None:
        return module
    folder = cache_dir()
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"k{digest}.py")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(source)
        os.replace(tmp, path)  # atomic: a parallel process sees the whole file or none
    spec = importlib.util.spec_from_file_location(f"gradgen_fused_k{digest}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # numba's disk cache finds a function's globals through its module's name
    spec.loader.exec_module(module)
    _loaded[digest] = module
    return module
