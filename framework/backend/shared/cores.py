"""How many cores other processes leave free, measured: what the engines' thread pools follow when the user sets
no thread count (``Executor(threads=N)`` does).

Why: a pool sized for every core waits on a core that another process holds. A BLAS (or OpenMP) pool splits
work between its threads and joins them; a thread on the busy core gets its share, and the work takes as long as
its slowest part. Measured on a 2-core machine with the other core busy: the anchors' LeNet step took 26.5 ms
with numpy's default two OpenBLAS threads and 7.0 ms with one (performance.md, "Threads on a busy machine").

``free_cores()`` estimates the cores nobody else is using from two readings of the kernel's CPU counters
(``/proc/stat``: busy time of all CPUs) less this process's own CPU time over the same interval (its pools'
threads included, so gradgen's own work never counts as another's), at most once every ``SAMPLE_SECONDS``;
at the first reading, after an idle spell (``IDLE_SECONDS``) and after an interval this process spent mostly idle
(``ACTIVE_SHARE``), from the other processes' tasks running that moment instead (this process's own running
threads, a pool still spinning after the run before, left out);
where the counters are missing (not Linux), the CPUs this process may use. Engine-neutral: the numpy engine
sizes its BLAS pools by ``cores_for_runs()`` (``numpy/threads.py``), the torch engine its OpenMP threads: the
free cores less those this process's own background preparations take (``background.py`` says why).
"""
from __future__ import annotations

import os
import threading
import time
from typing import Callable

from .background import preparations

__all__ = ["ACTIVE_SHARE", "IDLE_SECONDS", "SAMPLE_SECONDS", "CoreMeter", "cores_for_runs", "free_cores", "usable_cpus"]

SAMPLE_SECONDS = 0.25
"""The shortest interval between two readings of the CPU counters (a reading costs ~20 us; a run may take 0.1)."""

IDLE_SECONDS = 2.0
"""An interval longer than this since the last reading describes a past in which this process sat idle, not the
present: the reading then counts the tasks running this moment instead (``procs_running``). Measured: after
another process's 2 s burst, the torch engine's next two ResNet steps ran at one thread, 165 ms against 90,
because the interval since the last reading was all burst."""

ACTIVE_SHARE = 0.5
"""An interval in which this process used less than this share of one core (its CPU seconds over the wall seconds)
saw it idle for much of the time, and what other processes did then need not have overlapped its runs (jobs that
take turns: a trainer and the process that prepares its data, the anchors' harness): the reading then counts the
tasks running this moment instead, as after an idle spell. Measured: the anchors' LeNet step on the torch engine
in blocks of 60 taking turns with a pure-Python process's 0.5 s blocks ran 45-55 % of its runs on one thread
(6.1-6.8 ms a step) with the interval counted, 8-14 % (5.7-5.8 ms) with this rule. A pool still spinning in the
process that ran just before (OpenBLAS's for about 0.1 s) shows among the tasks running, and does take a core."""


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _procs_running() -> int | None:
    try:
        with open("/proc/stat", "rb") as f:
            for line in f:
                if line.startswith(b"procs_running "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _own_running_threads() -> int | None:
    """This process's threads running or ready to run this moment (state R in ``/proc/self/task/*/stat``), the
    caller included, or None where the files are missing."""
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return None
    running = 0
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # (a thread that ended since the listing)
            continue
        state_at = stat.rfind(b")") + 2  # (the name, in parentheses, may hold spaces and parentheses)
        running += stat[state_at:state_at + 1] == b"R"
    return running


def _running_tasks(looks: int = 3, apart: float = 0.0) -> int | None:
    """The other processes' tasks the kernel has running or ready to run this moment (``/proc/stat``'s
    ``procs_running`` less this process's own running threads, ``_own_running_threads``), or None where the file
    says nothing: the least of ``looks`` looks, each after a sleep of ``apart`` seconds, because whatever woke this
    process (a pipe's writer, a lock's holder) is often still queued at the first look (one look in a harness that
    writes each worker its command saw two tasks on an idle machine at every wake-up, and the torch engine ran
    each block's first two steps on one thread). A sleep of 0 is enough: it lets the waker run and block.
    Measured on the 2-core VM, a parent waking a child through a pipe and then waiting for its answer, 300
    wake-ups: the child's first look saw 2 tasks in 294, a look after ``time.sleep(0)`` 1 in 296 (after 25 us:
    295), while looks 1 ms apart that only spun saw 2 throughout. Longer sleeps cost the run that reads them: with
    0.5 ms apart, the first torch-engine LeNet step after a 0.3 s pause took 2.6 ms over the steady step, with 0,
    1.4 (PyTorch's own: 1.2-1.3).

    This process's own threads are not another's work: an engine's pool still spinning after the run before (the
    xla engine's, right after its runs) showed among the running tasks, and in 2 of 4 fresh processes weighing the
    anchors' transformer block the torch engine's first runs of a check after 2 s of xla runs went to one thread
    (202-213 ms against 83-126 at two), and the check kept xla on those times. Their states are read (~0.2 ms for
    17 threads) only in a look that sees more tasks running than the caller."""
    seen = []
    for i in range(looks):
        if i:
            time.sleep(apart)
        running = _procs_running()
        if running is not None:
            own = (_own_running_threads() if running > 1 else None) or 1  # (the caller alone where unread)
            running = max(0, running - own)
        seen.append(running)
    return None if None in seen else min(seen)


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
                 own: Callable[[], float] = time.process_time, clock: Callable[[], float] = time.monotonic,
                 running: Callable[[], int | None] = _running_tasks):
        self.cpus = cpus or usable_cpus()
        self._busy, self._own, self._clock, self._running = busy, own, clock, running
        self._last: tuple[float, float, float] | None = None
        self._free = self.cpus
        self._lock = threading.Lock()

    def free(self) -> int:
        """The whole cores free for this process now (at least 1): all usable CPUs less what other processes
        kept busy since the last reading, rounded to the nearest core; at the first reading and after an interval
        that saw this process idle (longer than ``IDLE_SECONDS``, or under ``ACTIVE_SHARE`` of a core used), less
        the other tasks running this moment."""
        now = self._clock()
        with self._lock:
            if self._last is not None and now - self._last[0] < SAMPLE_SECONDS:
                return self._free
            busy = self._busy()
            if busy is None:
                return self.cpus
            reading = (now, busy, self._own())
            if self._worked_through(reading):
                wall = reading[0] - self._last[0]
                others = max(0.0, (reading[1] - self._last[1]) - (reading[2] - self._last[2])) / wall
            else:  # no interval that tells of now: the other processes' tasks running now (else the load average)
                running = self._running()
                others = running if running is not None else os.getloadavg()[0]
            self._free = max(1, min(self.cpus, round(self.cpus - others)))
            self._last = reading
            return self._free

    def _worked_through(self, reading: tuple[float, float, float]) -> bool:
        """Whether the interval from the last reading to ``reading`` (wall, busy and own seconds) is one this
        process spent working (not longer than ``IDLE_SECONDS``, ``ACTIVE_SHARE`` of a core used at least), so
        that what the others did in it overlapped its runs."""
        if self._last is None:
            return False
        wall = reading[0] - self._last[0]
        return 0 < wall <= IDLE_SECONDS and reading[2] - self._last[2] >= ACTIVE_SHARE * wall


_METER = CoreMeter()


def free_cores() -> int:
    """The cores other processes leave free, as the process-wide meter last measured them (``CoreMeter``)."""
    return _METER.free()


def cores_for_runs() -> int:
    """The cores a run's thread pools may use (at least 1): those other processes leave free, less one for each
    engine preparation this process runs in the background beside the run (``background.preparations``)."""
    return max(1, free_cores() - preparations())
