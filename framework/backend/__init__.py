"""The engines that can run a program, by name: ``Executor(backend=NAME)``; one folder per compiled backend.

``numpy`` is the interpreter of numpy kernels in ``runtime/`` (always there). ``xla`` lowers a whole block to
one XLA computation through jax (the ``gradgen[xla]`` extra). A backend's module is imported on first use, so
gradgen imports and runs without the extras; ``backends()`` lists the ones whose requirements are installed.

    >>> from gradgen.framework import backends
    >>> backends()                       # doctest: +SKIP
    ['numpy', 'xla']
"""
from __future__ import annotations

from importlib import import_module
from importlib.util import find_spec
from typing import Any

from ..errors import ExecutionError

__all__ = ["AUTO", "BACKENDS", "DEFAULT_BACKEND", "backends", "load_backend"]

DEFAULT_BACKEND = "numpy"

AUTO = "auto"
"""Not an engine: ``Executor(backend="auto")`` tries numpy and the installed compiled backend on each program's
first runs and runs the rest on the faster (``runtime/auto_run.py``)."""

BACKENDS: dict[str, tuple[str | None, str]] = {
    "numpy": (None, "numpy kernels run one op (or one fused region) at a time; always installed"),
    "xla": ("jax", "the whole block as one XLA computation through jax: pip install 'gradgen[xla]'"),
}
"""name -> (the package it needs, or None; what it is)."""

_MODULES = {"xla": ".xla"}


def backends() -> list[str]:
    """The names of the backends whose requirements are installed, in ``BACKENDS`` order."""
    return [name for name, (needs, _) in BACKENDS.items() if needs is None or find_spec(needs) is not None]


def load_backend(name: str) -> Any:
    """The backend module ``name`` (its ``compile_block``, ``problems``, ``LOWERINGS``), or an ExecutionError
    saying which names exist and what to install."""
    if name not in BACKENDS:
        raise ExecutionError(f"unknown backend '{name}': the backends are {', '.join(BACKENDS)}")
    if name == "numpy":
        raise ExecutionError("the numpy backend is the executor's own plan, not a loadable module")
    needs, what = BACKENDS[name]
    if needs is not None and find_spec(needs) is None:
        raise ExecutionError(f"backend '{name}' needs the package '{needs}', which is not installed ({what})")
    return import_module(_MODULES[name], __name__)
