"""The process's communicator: who the other data-parallel ranks are, and how arrays travel between them.

Collective kernels (``kernels/collective.py``) ask ``communicator()`` when a
plan is built. It is, in this order: the one ``init_parallel`` set; MPI's
``COMM_WORLD`` through mpi4py when mpi4py is installed; else ``Solo()``, a
world of one, so a data-parallel program runs unchanged in one process
without MPI. A process that ``mpiexec`` started several times over but that
cannot import mpi4py stops with an error rather than train alone, silently.

    comm = init_parallel()          # COMM_WORLD; an uncaught error on any rank ends every rank
    comm.rank, comm.size

The transport is MPI's, never ours: ``MpiCommunicator`` is a thin wrapper
over an mpi4py communicator that also counts the seconds spent waiting.
"""
from __future__ import annotations

import os
import sys
import time
import traceback
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np

from ..errors import DistributedError
from .rank_pids import record_rank

_LAUNCH_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS")
"""Environment variables through which mpiexec (MPICH's Hydra, Open MPI) tells a process the world's size."""


class Done:
    """A finished transfer (the Solo communicator's requests)."""

    def Wait(self) -> None:  # noqa: N802 - the mpi4py request's spelling
        return None

    def Test(self) -> bool:  # noqa: N802
        return True


class Communicator:
    """What collective kernels need: rank and size, a non-blocking sum, a broadcast, a barrier, an abort.

    ``waited`` counts the seconds spent blocked in ``wait`` (the share of a
    step lost to communication that overlap did not hide); ``started`` the
    seconds spent in ``start_sum`` and ``progress`` (handing data to MPI).
    """

    rank = 0
    size = 1

    def __init__(self) -> None:
        self.waited = 0.0
        self.started = 0.0
        self.pending: list[Any] = []

    def start_sum(self, send: np.ndarray, recv: np.ndarray) -> Any:
        """Start summing ``send`` across ranks into ``recv``; return a request for ``wait``."""
        raise NotImplementedError

    def start_max(self, send: np.ndarray, recv: np.ndarray) -> Any:
        """Start taking the elementwise maximum of ``send`` across ranks into ``recv``; return a request."""
        raise NotImplementedError

    def broadcast(self, array: np.ndarray, root: int) -> np.ndarray:
        """Root's ``array`` on every rank (a new array; the argument is not changed)."""
        raise NotImplementedError

    def barrier(self) -> None:
        """Return when every rank has called it."""

    def allgather(self, value: Any) -> list:
        """Every rank's ``value`` (a small picklable object), in rank order, on every rank."""
        return [value]

    def abort(self, code: int = 1) -> None:
        """End every rank's process now."""
        os._exit(code)

    def wait(self, request: Any) -> None:
        """Block until ``request`` is done, counting the time in ``waited``."""
        begin = time.perf_counter()
        request.Wait()
        self.waited += time.perf_counter() - begin

    def progress(self) -> None:
        """Let the MPI library advance pending transfers (MPI moves data only inside MPI calls)."""


class Solo(Communicator):
    """A world of one process: a sum is a copy, a broadcast is the identity."""

    def start_sum(self, send: np.ndarray, recv: np.ndarray) -> Done:
        np.copyto(recv, send)
        return Done()

    start_max = start_sum  # over one rank, both are a copy

    def broadcast(self, array: np.ndarray, root: int) -> np.ndarray:
        if root != 0:
            raise DistributedError(f"broadcast from rank {root}, but this world has one rank (0)")
        return np.array(array)


class MpiCommunicator(Communicator):
    """An mpi4py communicator: ``Iallreduce`` for sums, ``Bcast``, ``Barrier`` and ``Abort``."""

    def __init__(self, comm: Any):
        super().__init__()
        from mpi4py import MPI  # only here: gradgen runs without mpi4py

        self.comm, self._sum, self._max = comm, MPI.SUM, MPI.MAX
        self._testall = MPI.Request.Testall
        self.rank, self.size = comm.Get_rank(), comm.Get_size()

    def start_sum(self, send: np.ndarray, recv: np.ndarray) -> Any:
        return self._start(send, recv, self._sum)

    def start_max(self, send: np.ndarray, recv: np.ndarray) -> Any:
        return self._start(send, recv, self._max)

    def _start(self, send: np.ndarray, recv: np.ndarray, op: Any) -> Any:
        begin = time.perf_counter()
        request = self.comm.Iallreduce(send, recv, op=op)
        self.pending.append(request)
        self.started += time.perf_counter() - begin
        return request

    def wait(self, request: Any) -> None:
        super().wait(request)
        self.pending = [r for r in self.pending if r is not request]

    def progress(self) -> None:
        if self.pending:
            begin = time.perf_counter()
            self._testall(self.pending)
            self.started += time.perf_counter() - begin

    def broadcast(self, array: np.ndarray, root: int) -> np.ndarray:
        if not 0 <= root < self.size:
            raise DistributedError(f"broadcast from rank {root}, but the world has ranks 0..{self.size - 1}")
        out = np.array(array, order="C")  # a contiguous copy that keeps 0-d shapes
        self.comm.Bcast(out, root=root)
        return out

    def barrier(self) -> None:
        self.comm.Barrier()

    def allgather(self, value: Any) -> list:
        return self.comm.allgather(value)

    def abort(self, code: int = 1) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        self.comm.Abort(code)
        os._exit(code)  # MPICH's Abort may return to its caller before the launcher kills it


_current: list[Communicator] = []


def launched_size() -> int:
    """The number of processes mpiexec says it started (1 when not started by mpiexec)."""
    for name in _LAUNCH_SIZE_VARS:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 1


def _world() -> Communicator:
    try:
        from mpi4py import MPI
    except ImportError:
        size = launched_size()
        if size > 1:
            raise DistributedError(f"this process is one of {size} that mpiexec started, but mpi4py is not "
                                   "installed, so it cannot reach the others: pip install 'gradgen[mpi]'") from None
        return Solo()
    world = MpiCommunicator(MPI.COMM_WORLD)
    if world.size > 1:
        install_abort_hook()  # also for scripts that never call init_parallel: no rank may wait forever
    return world


def communicator() -> Communicator:
    """The process's communicator: the one ``init_parallel`` set, else MPI's world (or ``Solo()`` without MPI)."""
    if not _current:
        _current.append(_world())
    return _current[0]


def report_and_abort(comm: Communicator, error: BaseException, prefix: str = "gradgen", detail: str = "") -> None:
    """Print ``error`` as this rank's, then end every rank (a lone failing rank would leave the others hanging).

    ``detail`` (a traceback) goes out in the same write. The pause before the
    abort lets mpiexec forward the text before it kills the processes.
    """
    message = "; ".join(line.strip() for line in str(error).splitlines() if line.strip()) or type(error).__name__
    sys.stderr.write(f"{detail}{prefix}: rank {comm.rank} of {comm.size}: error: {type(error).__name__}: {message}\n")
    sys.stderr.flush()
    time.sleep(_FORWARD_PAUSE)
    comm.abort(1)


_FORWARD_PAUSE = 0.25
"""Seconds between reporting an error and aborting: output in flight reaches mpiexec first."""


def _abort_hook(kind, value, tb) -> None:
    report_and_abort(communicator(), value, detail="".join(traceback.format_exception(kind, value, tb)))


def install_abort_hook() -> None:
    """Make an uncaught exception report this rank's error and abort every rank (``sys.excepthook``).

    A hook the script set itself is left alone; ours is installed once.
    """
    if sys.excepthook is sys.__excepthook__:
        sys.excepthook = _abort_hook


def guard_launched_process() -> None:
    """Under mpiexec with several ranks, install the abort hook now, before any rank can fail.

    The executor's module calls this when it loads, so a script that never
    calls ``init_parallel`` still ends every rank when one raises, even
    before its first run (MPICH's launcher lets the others wait forever
    for a rank that exited with a non-zero code).
    """
    if launched_size() > 1:
        install_abort_hook()
        record_rank()  # so that gradgen launch can name this rank if it is killed


def init_parallel(comm: Communicator | Any | None = None, abort_on_error: bool = True) -> Communicator:
    """Set the process's communicator and return it.

    ``comm`` may be a ``Communicator``, an mpi4py communicator, or None for
    MPI's world (``Solo()`` when mpi4py is absent and mpiexec did not start
    this process). With ``abort_on_error`` and more than one rank, an
    uncaught exception prints this rank's error and aborts every rank, so
    no rank waits forever for one that is gone.

    >>> comm = init_parallel()
    >>> comm.rank, comm.size
    (0, 1)
    """
    if comm is None:
        comm = _world()
    elif not isinstance(comm, Communicator):
        comm = MpiCommunicator(comm)
    _current[:] = [comm]
    if abort_on_error and comm.size > 1:
        sys.excepthook = _abort_hook
    elif sys.excepthook is _abort_hook:
        sys.excepthook = sys.__excepthook__
    return comm


@contextmanager
def abort_on_error(comm: Communicator, with_traceback: bool = False) -> Iterator[None]:
    """Run the body; if it raises on a world of several ranks, report the error as this rank's and abort them all
    (printing the traceback first ``with_traceback``)."""
    try:
        yield
    except BaseException as e:
        if comm.size > 1 and not isinstance(e, SystemExit):
            report_and_abort(comm, e, detail=traceback.format_exc() if with_traceback else "")
        raise


__all__ = ["Communicator", "Solo", "MpiCommunicator", "communicator", "init_parallel", "abort_on_error",
           "report_and_abort", "launched_size", "install_abort_hook", "guard_launched_process"]
