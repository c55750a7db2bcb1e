"""Compiling generated kernels on one worker thread, so that no run waits for numba (``gradgen[fast]``).

A region or fused loop (``fuse_region``, ``fuse_elementwise``) asks for its kernel after its warm runs; the
worker thread imports numba, loads the module (``jit.load_source``) and compiles it for the argument types
of that run, or reads the machine code from numba's disk cache. Until it is ready the step runs its ops one
by one, so the run that asked, and every run while the compiler works, takes the time it took before
(slowed only by sharing the interpreter lock with the worker). A compiled kernel takes no new argument
types at call time (``disable_compile``): a call with other types raises TypeError, and the step runs op by
op instead of compiling on the run's thread.

On the worker, a KeyboardInterrupt never lands inside numba's compiler (Python delivers signals to the main
thread only), so a Ctrl-C during a compile cannot leave numba half-initialised for the rest of the process.

Tests and tools that need the compiled code now call ``wait_for_compiles()``, or build plans with
``PlanOptions(background_compile=False)``: the run that asks then waits for the worker.
"""
from __future__ import annotations

import threading
import warnings
from collections import deque
from concurrent.futures import Future
from typing import Any, Callable, Sequence

import numpy as np

from . import jit

__all__ = ["Budget", "LazyKernel", "arg_types", "wait_for_compiles"]

ArgType = Any
"""Plain data naming a numba argument type: (dtype str, ndim, layout, readonly) for an array, else the value."""

_jobs: deque = deque()
_idle = threading.Condition()
_queued = 0
_worker: threading.Thread | None = None


def arg_types(args: Sequence[Any]) -> tuple[ArgType, ...]:
    """The types numba would see for ``args``, as plain data (the run's thread never imports numba)."""
    specs = []
    for a in args:
        if type(a) is np.ndarray:
            flags = a.flags
            layout = "C" if flags.c_contiguous else "F" if flags.f_contiguous else "A"
            specs.append((a.dtype.str, a.ndim, layout, not flags.writeable))
        else:
            specs.append(a)
    return tuple(specs)


def _numba_type(spec: ArgType):
    import numba
    if isinstance(spec, tuple):
        dtype, ndim, layout, readonly = spec
        return numba.types.Array(numba.from_dtype(np.dtype(dtype)), ndim, layout, readonly=readonly)
    return numba.typeof(spec)


def _compile(source: str, types: tuple[ArgType, ...]) -> Callable[..., Any]:
    """The module's ``kernel``, compiled (or loaded from the disk cache) for ``types`` only."""
    kernel = jit.load_source(source).kernel
    kernel.disable_compile(False)  # two regions with one source share a dispatcher: allow a second signature
    try:
        kernel.compile(tuple(_numba_type(t) for t in types))
    finally:
        if kernel.overloads:
            kernel.disable_compile()
    return kernel


def _work() -> None:
    global _queued
    while True:
        with _idle:
            while not _jobs:
                _idle.wait()
            future, source, types = _jobs.popleft()
        try:
            future.set_result(_compile(source, types))
        except BaseException as e:  # numba's errors share no base worth naming; the step reports it
            future.set_exception(e)
        with _idle:
            _queued -= 1
            _idle.notify_all()


def _submit(source: str, types: tuple[ArgType, ...]) -> Future:
    global _queued, _worker
    future: Future = Future()
    with _idle:
        if _worker is None:
            _worker = threading.Thread(target=_work, name="gradgen-compile", daemon=True)
            _worker.start()
        _jobs.append((future, source, types))
        _queued += 1
        _idle.notify_all()
    return future


def wait_for_compiles(timeout: float | None = None) -> bool:
    """Block until every kernel asked for so far is compiled (or failed); False if ``timeout`` ran out first.

    >>> wait_for_compiles()  # doctest: +SKIP
    True
    """
    with _idle:
        return _idle.wait_for(lambda: _queued == 0, timeout)


class Budget:
    """How many more ops one plan may compile (numba takes about 0.1 s an op, on the worker): a program of 100k
    small ops would otherwise keep a core compiling for hours. Past it, the plan's fused steps run op by op."""

    OPS = 2048

    def __init__(self, ops: int = OPS):
        self.left = ops

    def take(self, ops: int) -> bool:
        """Spend ``ops`` if that many are left; say whether they were."""
        if ops > self.left:
            return False
        self.left -= ops
        return True


class LazyKernel:
    """One generated kernel (``source()`` writes its module text), compiled on the worker when ``start`` is called. ``kernel`` is None until it is
    ready (and stays None after a failure, which warns once, naming ``what``)."""

    def __init__(self, source: Callable[[], str], what: str, background: bool):
        self.source, self.what, self.background = source, what, background
        self.kernel: Callable[..., Any] | None = None
        self.pending: Future | None = None

    def start(self, args: Sequence[Any]) -> None:
        """Ask for the kernel compiled for ``args``' types; without ``background``, wait for it."""
        self.pending = _submit(self.source(), arg_types(args))  # the source is written here: plans own no lock
        if not self.background:
            self.pending.exception()  # waits (a Ctrl-C interrupts the wait, not the compiler)
        self.poll()

    def poll(self) -> Callable[..., Any] | None:
        """The compiled kernel once the worker is done, else None."""
        future = self.pending
        if future is not None and future.done():
            self.pending = None
            error = future.exception()
            if error is None:
                self.kernel = future.result()
            else:
                first = str(error).splitlines()[0] if str(error) else ""
                warnings.warn(f"{self.what} runs op by op: numba cannot compile it ({type(error).__name__}: {first})",
                              RuntimeWarning)
        return self.kernel
