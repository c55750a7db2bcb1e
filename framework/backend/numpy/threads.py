"""How many threads the numpy engine's BLAS products use: what the user set, or the cores other work leaves free.

Why: a BLAS pool sized for every core waits on a core that another process holds. OpenBLAS splits a product
between its threads and joins them; a thread on the busy core gets half of it, and the product takes as long as
its slowest part. Measured on this 2-core machine with the other core busy: the anchors' LeNet step took 26.5 ms
with numpy's default two OpenBLAS threads and 7.0 ms with one; quiet, 4.0 ms with two (performance.md,
"Threads on a busy machine").

``free_cores()`` estimates the cores nobody else is using from two readings of the kernel's CPU counters
(``/proc/stat``: busy time of all CPUs) less this process's own CPU time over the same interval (its BLAS
threads included, so gradgen's own work never counts as another's), at most once every ``SAMPLE_SECONDS``; where
the counters are missing (not Linux), the CPUs this process may use. ``blas_threads(n)`` runs a block with
numpy's OpenBLAS and gradgen's GEMM provider (``blas.PROVIDER``, MKL where chosen) at ``n`` threads and puts
the counts the process had back after it, so the user's own numpy products outside a run keep theirs.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import threading
import time
from typing import Callable, Iterator

from . import blas

__all__ = ["SAMPLE_SECONDS", "CoreMeter", "blas_threads", "free_cores", "usable_cpus"]

SAMPLE_SECONDS = 0.25
"""The shortest interval between two readings of the CPU counters (a reading costs ~20 us; a run may take 0.1)."""


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _machine_busy_seconds() -> float | None:
    """Seconds all CPUs have spent busy since boot (``/proc/stat``'s first line: all but idle and iowait), or
    None where the file is missing or unreadable."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if len(fields) < 6 or fields[0] != b"cpu":
        return None
    ticks = [int(v) for v in fields[1:9]]
    idle = ticks[3] + ticks[4]
    return (sum(ticks) - idle) / os.sysconf("SC_CLK_TCK")


class CoreMeter:
    """The free-core estimate from successive readings: ``busy()`` (the machine's busy CPU seconds, or None),
    ``own()`` (this process's CPU seconds) and ``clock()`` (wall seconds) are injectable for tests."""

    def __init__(self, cpus: int | None = None, busy: Callable[[], float | None] = _machine_busy_seconds,
                 own: Callable[[], float] = time.process_time, clock: Callable[[], float] = time.monotonic):
        self.cpus = cpus or usable_cpus()
        self._busy, self._own, self._clock = busy, own, clock
        self._last: tuple[float, float, float] | None = None
        self._free = self.cpus
        self._lock = threading.Lock()

    def free(self) -> int:
        """The whole cores free for this process now (at least 1): all usable CPUs less what other processes
        kept busy since the last reading, rounded to the nearest core."""
        now = self._clock()
        with self._lock:
            if self._last is not None and now - self._last[0] < SAMPLE_SECONDS:
                return self._free
            busy = self._busy()
            if busy is None:
                return self.cpus
            reading = (now, busy, self._own())
            if self._last is not None:
                wall = reading[0] - self._last[0]
                others = max(0.0, (reading[1] - self._last[1]) - (reading[2] - self._last[2])) / wall
                self._free = max(1, min(self.cpus, round(self.cpus - others)))
            else:  # no interval yet: the load average stands for the others (this process has hardly run)
                self._free = max(1, min(self.cpus, round(self.cpus - os.getloadavg()[0])))
            self._last = reading
            return self._free


_METER = CoreMeter()


def free_cores() -> int:
    """The cores other processes leave free, as the process-wide meter last measured them (``CoreMeter``)."""
    return _METER.free()


def _thread_calls(lib: ctypes.CDLL, get_name: str, set_name: str
                  ) -> tuple[Callable[[], int], Callable[[int], None]] | None:
    """A BLAS library's (get thread count, set thread count) functions, or None where it lacks them."""
    try:
        get, put = getattr(lib, get_name), getattr(lib, set_name)
    except AttributeError:
        return None
    get.restype, put.argtypes = ctypes.c_int, [ctypes.c_int]
    return get, put


def _pools() -> list[tuple[Callable[[], int], Callable[[int], None]]]:
    """(get, set) of every BLAS pool gradgen's products reach: numpy's OpenBLAS and, where it is another
    library, the GEMM provider."""
    pools = []
    numpy_blas = blas.numpy_openblas()
    if numpy_blas is not None and (calls := _thread_calls(numpy_blas.lib, "scipy_openblas_get_num_threads64_",
                                                          "scipy_openblas_set_num_threads64_")):
        pools.append(calls)
    provider = blas.PROVIDER
    if provider is not None and provider.name == "mkl" and (
            calls := _thread_calls(provider.lib, "MKL_Get_Max_Threads", "MKL_Set_Num_Threads")):
        pools.append(calls)
    return pools


_POOLS: list | None = None
_LOCK = threading.Lock()
_ACTIVE = {"runs": 0, "counts": []}
"""How many ``blas_threads`` blocks are open (runs of several executors may overlap) and the pools' counts before
the first of them opened: what the last one to close puts back."""


@contextlib.contextmanager
def blas_threads(n: int, exact: bool = False) -> Iterator[None]:
    """Run the block with every BLAS pool at ``n`` threads, or (``exact`` False) at ``n`` or the pool's own count
    if that is smaller (a limit the user set, ``OPENBLAS_NUM_THREADS`` or threadpoolctl's, stands). The pools
    get the counts they had back when the last open block closes (blocks of other threads may overlap)."""
    global _POOLS
    with _LOCK:
        if _POOLS is None:
            _POOLS = _pools()
        if _ACTIVE["runs"] == 0:
            _ACTIVE["counts"] = [get() for get, _ in _POOLS]
        _ACTIVE["runs"] += 1
        for (get, put), was in zip(_POOLS, _ACTIVE["counts"]):
            want = n if exact else min(n, was)
            if get() != want:
                put(want)
    try:
        yield
    finally:
        with _LOCK:
            _ACTIVE["runs"] -= 1
            if _ACTIVE["runs"] == 0:
                for (get, put), was in zip(_POOLS, _ACTIVE["counts"]):
                    if get() != was:
                        put(was)
