"""The engines that can run a program, by name: ``Executor(backend=NAME)``; one folder per backend.

This module is the one interface between the executor (``runtime/``) and the engines: ``runner(name, settings)``
gives the ``Runner`` of backend ``name`` (its package's ``make_runner``), and the executor knows nothing else of
it. ``numpy`` is the reference interpreter of numpy kernels (always there); ``xla`` lowers a whole block to one
XLA computation through jax (the ``gradgen[xla]`` extra); ``torch`` runs block 0 op by op on PyTorch CPU tensors.
A backend's package is imported on first use, so gradgen imports and runs without the extras; ``backends()``
lists the ones whose requirements are installed. The analyses every backend shares (run signature, conformance,
loop read-back) live in ``backend/shared``.

    >>> from gradgen.framework import backends
    >>> backends()                       # doctest: +SKIP
    ['numpy', 'xla', 'torch']
"""
from __future__ import annotations

import os
from importlib import import_module
from importlib.util import find_spec
from typing import Any, Callable, Mapping, NamedTuple, Protocol, Sequence

from ..errors import ExecutionError
from .shared.weighing import WEIGHED_FOR, feed_batch, product_bound

__all__ = ["AUTO", "BACKEND_ENV", "BACKENDS", "DEFAULT_BACKEND", "NOT_BY_DEFAULT", "WEIGHED_FOR", "RunSettings",
           "Runner", "backends", "default_backend", "feed_batch", "load_backend", "product_bound", "runner"]

DEFAULT_BACKEND = "numpy"
"""The reference interpreter, always installed: what ``Executor()`` runs on when no compiled backend is
(``default_backend``), and what ``auto`` compares the compiled one with."""

AUTO = "auto"
"""Not an engine: ``Executor(backend="auto")`` tries numpy and the installed compiled backends on each program's
first runs and runs the rest on the fastest (``runtime/auto_run.py``)."""

BACKENDS: dict[str, tuple[str | None, str]] = {
    "numpy": (None, "the reference interpreter: numpy kernels run one op at a time, in block order; always installed"),
    "xla": ("jax", "the whole block as one XLA computation through jax: pip install 'gradgen[xla]'"),
    "torch": ("torch", "block 0 op by op on PyTorch CPU tensors (eager ATen, oneDNN convolutions): pip install torch"),
}
"""name -> (the package it needs, or None; what it is)."""

NOT_BY_DEFAULT: tuple[str, ...] = ()
"""Engines ``Executor()`` never picks by itself (only when named). Empty: ``auto`` weighs every installed engine
(the torch engine since it ran ResNet blocks fastest), for the programs ``WEIGHED_FOR`` (``shared/weighing.py``)
lets in; a program it cannot run, control flow among them, leaves it out of that program's trial."""

_MODULES = {"numpy": ".numpy", "xla": ".xla", "torch": ".torch"}


class RunSettings(NamedTuple):
    """An executor's settings, as every backend reads them (``make_runner(settings)``, ``settings()`` each run)."""

    place: Any
    """``CPUPlace()`` or ``CUDAPlace(N)``."""
    check_types: bool
    """Check every op's outputs against their declared types (a backend that checks while it compiles, or
    cannot check per op, refuses it)."""
    check_nan_inf: bool
    """Stop at the first op that makes a NaN or Inf (refused by backends without per-op checks)."""
    options: Any
    """The backend's own options object, or None for its defaults (numpy: ``PlanOptions``)."""
    profiler: Any
    """A ``runtime.profile.Profiler`` the run's steps are timed into (the numpy backend's; every engine tells it the
    threads its pool ran at), or None."""
    threads: int | None = None
    """The threads an engine's pools run with (``Executor(threads=N)``), or None: the cores other work leaves
    free (``backend/shared/cores.py``), at most what the pools' own settings allow (numpy:
    ``backend/numpy/threads.py``)."""
    compile_behind: bool = True
    """Whether a compiled engine may give a run of shapes new to a compiled block to the numpy reference while it
    compiles them in the background (``backend/xla/runner.py``); ``backend="auto"`` says no: its trial must time
    the engine it names."""


class Runner(Protocol):
    """One executor's runs on one backend (what ``make_runner`` returns)."""

    name: str

    def run(self, program, feed: Mapping[str, Any], fetch_names: Sequence[str], scope, return_numpy: bool,
            mark: Callable[[str], None], built: Callable[[float], None], agreed: Callable[[], None]) -> list:
        """One run of ``program``'s block 0: the fetched arrays, in order; the scope gets the changed persistables
        only if the whole run succeeds. ``mark(phase)`` ends each phase (``runtime/profile.PHASES``),
        ``built(seconds)`` is told of every plan build or compile, ``agreed()`` raises before the commit when the
        other ranks of a data-parallel run were fed other shapes."""

    def problems(self, block) -> list[str]:
        """The ops of ``block`` this backend cannot run, one line each (empty: it runs them all)."""


BACKEND_ENV = "GRADGEN_BACKEND"
"""With this environment variable set to an engine's name (or ``auto``), ``Executor()`` uses it (the test suite
sets ``numpy``: the engines are compared with each other by tests of their own)."""


def default_backend(place, options: Any = None, check_nan_inf: bool = False, check_types: bool | None = None
                    ) -> str:
    """The engine ``Executor()`` runs on when the caller names none: ``GRADGEN_BACKEND`` if set; else on a GPU the
    first installed compiled backend; else ``auto`` when a compiled backend is installed (each program's runs
    go to the engine measured faster for it) and the caller asked for nothing only numpy does (per-op checks,
    plan options); else ``numpy``."""
    named = os.environ.get(BACKEND_ENV)
    if named:
        if named not in BACKENDS and named != AUTO:
            raise ExecutionError(f"{BACKEND_ENV}={named!r}: the backends are {', '.join(BACKENDS)} and {AUTO}")
        return named
    compiled = [name for name in backends() if name not in (DEFAULT_BACKEND, *NOT_BY_DEFAULT)]
    if type(place).__name__ == "CUDAPlace":
        return compiled[0] if compiled else DEFAULT_BACKEND
    if compiled and not (options is not None or check_nan_inf or check_types):
        return AUTO
    return DEFAULT_BACKEND


def backends() -> list[str]:
    """The names of the backends whose requirements are installed, in ``BACKENDS`` order."""
    return [name for name, (needs, _) in BACKENDS.items() if needs is None or find_spec(needs) is not None]


def load_backend(name: str) -> Any:
    """The backend package ``name`` (its ``make_runner``, and what its tools read: xla's ``LOWERINGS``), or an
    ExecutionError saying which names exist and what to install."""
    if name not in BACKENDS:
        raise ExecutionError(f"unknown backend '{name}': the backends are {', '.join(BACKENDS)}")
    needs, what = BACKENDS[name]
    if needs is not None and find_spec(needs) is None:
        raise ExecutionError(f"backend '{name}' needs the package '{needs}', which is not installed ({what})")
    return import_module(_MODULES[name], __name__)


def runner(name: str, settings: Callable[[], RunSettings]) -> Runner:
    """The runner of backend ``name`` for an executor whose present settings ``settings()`` gives (its check
    flags may change between runs); an ExecutionError when the backend is unknown, not installed, or cannot
    honour the settings (a GPU place on numpy, per-op checks on xla)."""
    return load_backend(name).make_runner(settings)
