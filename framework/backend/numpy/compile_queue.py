"""Compiling generated kernels away from the run, so that no run waits for numba (``gradgen[fast]``).

A region (``fuse_region``) asks for its kernel after its warm runs, and
runs its ops one by one until the kernel is ready. A worker thread takes the requests in turn and hands
each to a compile process (one per process, started at the first request, scheduled only on idle CPU): it
compiles the module (``jit.load_source``) for the argument types of the run that asked, and numba writes
the machine code to its disk cache. The worker thread then loads that code here (milliseconds, after
numba's import once). A thread compiling in this process would hold the interpreter lock for seconds:
measured on the seed MLP (regions off, interleaved, on a loaded 2-core machine), a step took 15.7 times
as long while a thread compiled beside it, 1.13 times while the idle-priority process did. Should the
compile process be unavailable, or a run wait for the kernel (``background_compile=False``), the worker
thread compiles itself.

A compiled kernel takes no new argument types at call time (``disable_compile``): a call with other types
raises TypeError, and the step runs op by op instead of compiling on the run's thread. A KeyboardInterrupt
never lands inside numba's compiler: Python delivers it to the main thread, and the compile process ignores
SIGINT, so a Ctrl-C during a compile leaves numba whole for the rest of the process.

Tests and tools that need the compiled code now call ``wait_for_compiles()``, or build plans with
``PlanOptions(background_compile=False)``: the run that asks then waits for its kernel.
"""
from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections import deque
from concurrent.futures import Future
from typing import Any, Callable, Sequence

import numpy as np

from . import jit

__all__ = ["Budget", "LazyKernel", "arg_types", "serve", "wait_for_compiles"]

ArgType = tuple
"""Plain data naming a numba argument type: ("array", dtype str, ndim, layout, readonly), or ("scalar", dtype str)."""

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
            specs.append(("array", a.dtype.str, a.ndim, layout, not flags.writeable))
        else:
            specs.append(("scalar", np.asarray(a).dtype.str))
    return tuple(specs)


def _numba_type(spec: ArgType):
    import numba
    if spec[0] == "array":
        _, dtype, ndim, layout, readonly = spec
        return numba.types.Array(numba.from_dtype(np.dtype(dtype)), ndim, layout, readonly=readonly)
    return numba.from_dtype(np.dtype(spec[1]))


def _compile(source: str, types: Sequence[ArgType]) -> Callable[..., Any]:
    """The module's ``kernel``, compiled (or loaded from the disk cache) for ``types`` only."""
    kernel = jit.load_source(source).kernel
    kernel.disable_compile(False)  # two regions with one source share a dispatcher: allow a second signature
    try:
        kernel.compile(tuple(_numba_type(t) for t in types))
    finally:
        if kernel.overloads:
            kernel.disable_compile()
    return kernel


class CompileError(Exception):
    """numba could not compile a generated kernel (the compile process's message)."""


def _lowest_priority() -> None:
    """In the compile process: run only on CPU time the runs it serves leave idle (Linux's SCHED_IDLE, else
    nice 19). At nice 5 the seed MLP's steps still took up to 30 times as long while it compiled: its BLAS
    threads wait for each other at every product, and one of them had lost its core to the compiler."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        if hasattr(os, "nice"):
            os.nice(19)


def serve(answer_fd: int) -> None:
    """The compile process: for each job read from stdin (one JSON line: source and argument types), compile
    it into the disk cache and answer one JSON line on ``answer_fd``, until stdin closes (its parent has exited).
    Answers have a pipe of their own: stdout goes nowhere, so whatever an imported module prints (a user's module
    on the path, a library's warning) cannot garble one."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C in the terminal is for the parent's run
    _lowest_priority()
    with os.fdopen(answer_fd, "w") as answers:
        for line in sys.stdin:
            job = json.loads(line)
            try:
                _compile(job["source"], [tuple(t) for t in job["types"]])
                answer = {"error": None}
            except Exception as e:  # numba's errors share no base worth naming
                answer = {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
            answers.write(json.dumps(answer) + "\n")
            answers.flush()


def _child_path() -> str:
    """The compile process's PYTHONPATH: this process's path (so it imports the same gradgen and numba), with the
    script's folder (``sys.path[0]``) last, so a user's module cannot shadow one numba imports."""
    first, rest = (sys.path[0], sys.path[1:]) if sys.path else ("", [])
    return os.pathsep.join(p for p in [*rest, first] if p)


class _Process:
    """The compile process, started at the first job; None once it cannot be used (then jobs compile here)."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.answers = None  # the read end of the process's answer pipe
        self.broken = False
        self.closing = False  # the interpreter is exiting: compile nothing more

    def prioritise(self, waited_for: bool) -> None:
        """Schedule the compile process as an ordinary process while someone waits for it, else on idle CPU."""
        proc = self.proc
        if proc is None or not hasattr(os, "SCHED_IDLE"):
            return
        try:
            os.sched_setscheduler(proc.pid, os.SCHED_OTHER if waited_for else os.SCHED_IDLE, os.sched_param(0))
        except OSError:
            pass  # it has exited, or this user may not raise its priority: it finishes at idle priority

    def compile(self, source: str, types: Sequence[ArgType]) -> None:
        """Have the compile process put the kernel in the disk cache; CompileError if numba cannot compile it,
        OSError if the process cannot be used."""
        if self.broken:
            raise OSError("the compile process is not available")
        try:
            if self.proc is None or self.proc.poll() is not None:
                if self.answers is not None:  # the process exited: its pipe with it
                    self.answers.close()
                env = dict(os.environ, PYTHONPATH=_child_path())
                read_end, write_end = os.pipe()
                try:
                    self.proc = subprocess.Popen(
                        [sys.executable, "-c",
                         f"from gradgen.framework.backend.numpy.compile_queue import serve; serve({write_end})"],
                        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
                        env=env, pass_fds=(write_end,))
                    # no preexec_fn: the child is spawned without running fork handlers (OpenMP warns at a fork)
                finally:
                    os.close(write_end)
                self.answers = os.fdopen(read_end, "r")
            self.proc.stdin.write(json.dumps({"source": source, "types": types}) + "\n")
            self.proc.stdin.flush()
            answer = self.answers.readline()
            if not answer:
                raise OSError("the compile process exited")
        except (OSError, ValueError):
            self.broken = True
            raise OSError("the compile process is not available") from None
        error = json.loads(answer)["error"]
        if error is not None:
            raise CompileError(error)


def _stop_process() -> None:
    """At exit: stop the compile process now (a compile in flight is lost; numba replaces cache files whole)."""
    _process.closing = True
    proc = _process.proc
    if proc is not None:
        proc.kill()
        proc.wait()
        proc.stdin.close()
        _process.answers.close()


_process = _Process()
atexit.register(_stop_process)


def _forget_after_fork() -> None:
    """In a forked child: the worker thread and the compile process stayed with the parent; start afresh."""
    global _worker, _queued, _process, _idle
    _worker, _queued, _process, _idle = None, 0, _Process(), threading.Condition()
    for future, *_ in _jobs:
        future.set_exception(OSError("the process forked before this kernel was compiled"))
    _jobs.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def _work() -> None:
    global _queued
    while True:
        with _idle:
            while not _jobs:
                _idle.wait()
            future, source, types, waited_for = _jobs.popleft()
        started = time.perf_counter()
        try:
            try:
                if not waited_for:  # a run waits for this one: no need to leave it the CPU
                    _process.compile(source, types)
            except OSError:
                if _process.closing:
                    raise
                # no compile process: this thread compiles
            kernel = _compile(source, types)  # read from the disk cache the process wrote
            future.seconds = time.perf_counter() - started
            future.set_result(kernel)
        except BaseException as e:  # numba's errors share no base worth naming; the step reports it
            future.set_exception(e)
        with _idle:
            _queued -= 1
            _idle.notify_all()


def _submit(source: str, types: tuple[ArgType, ...], waited_for: bool = False) -> Future:
    global _queued, _worker
    future: Future = Future()
    with _idle:
        if _worker is None:
            _worker = threading.Thread(target=_work, name="gradgen-compile", daemon=True)
            _worker.start()
        _jobs.append((future, source, types, waited_for))
        _queued += 1
        _idle.notify_all()
    return future


def wait_for_compiles(timeout: float | None = None) -> bool:
    """Block until every kernel asked for so far is compiled (or failed); False if ``timeout`` ran out first.

    >>> wait_for_compiles()  # doctest: +SKIP
    True
    """
    _process.prioritise(True)  # someone waits for it: the compile process may have the CPU at once
    try:
        with _idle:
            return _idle.wait_for(lambda: _queued == 0, timeout)
    finally:
        _process.prioritise(False)


class Budget:
    """How many more ops one plan may compile (numba takes about 0.1 s an op, on the worker): a program of 100k
    small ops would otherwise keep a core compiling for hours. Past it, the plan's fused steps run op by op."""

    OPS = 2048

    def __init__(self, ops: int | None = None):
        self.left = self.OPS if ops is None else ops

    def take(self, ops: int) -> bool:
        """Spend ``ops`` if that many are left; say whether they were."""
        if ops > self.left:
            return False
        self.left -= ops
        return True


class LazyKernel:
    """One generated kernel (``source()`` writes its module text), compiled on the worker when ``start`` is
    called. ``kernel`` is None until it is ready (and stays None after a failure, which warns once, naming
    ``what``)."""

    def __init__(self, source: Callable[[], str], what: str, background: bool):
        self.source, self.what, self.background = source, what, background
        self.kernel: Callable[..., Any] | None = None
        self.pending: Future | None = None
        self.seconds = 0.0
        """How long the worker took to compile (or load) the kernel."""

    def start(self, args: Sequence[Any]) -> None:
        """Ask for the kernel compiled for ``args``' types; without ``background``, wait for it."""
        # the source is written here (the worker never reads a block); without ``background`` the worker
        # thread compiles it at once, at the run's priority, while the run waits
        self.pending = _submit(self.source(), arg_types(args), waited_for=not self.background)
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
                self.seconds = getattr(future, "seconds", 0.0)
            else:
                first = str(error).splitlines()[0] if str(error) else ""
                warnings.warn(f"{self.what} runs op by op: numba cannot compile it ({type(error).__name__}: {first})",
                              RuntimeWarning)
        return self.kernel
