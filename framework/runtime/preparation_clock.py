"""How long an engine's preparation would take alone, measured while it runs beside other work.

``backend="auto"`` records how long the chosen engine took to prepare (``remembered.py``), and a later process waits
for it before its first run when that was short (``trial_rules.RECALLED_WAIT_SECONDS``). A trial prepares its
engines in background threads beside numpy's runs and each other, so their wall times overstate what a later
process, which prepares the one engine alone, will take: LeNet's torch preparation took 3.9-5.4 s beside the trial
and 2.2 s alone, and a record over the 5 s rule made the next process run numpy first and weigh the engines again
inside the anchors' timed rounds (``design_docs/performance.md``, the twenty-first stop). The CPU time the
preparation spends (its own thread's, and that of the threads it starts: XLA compiles on a pool of its own, 4.0 s of
CPU in 3.8 s of wall time for a 3,005-op program where its calling thread spent 1.9) is what it costs whatever runs
beside it; the smaller of that and the wall time is the record's estimate (the wall time when it waited, not
computed: a disk or a lock; a later process's caches are warm).
"""
from __future__ import annotations

import os
import threading
import time
from typing import Callable

__all__ = ["PreparationClock"]

_TASKS = "/proc/self/task"
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") and "SC_CLK_TCK" in os.sysconf_names else 100


def _threads_cpu() -> dict[int, float] | None:
    """Each of this process's threads' CPU seconds by its native id, or None where ``/proc`` does not say."""
    try:
        ids = os.listdir(_TASKS)
    except OSError:
        return None
    seconds = {}
    for name in ids:
        try:
            with open(f"{_TASKS}/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):  # (a thread that ended meanwhile)
            continue
        seconds[int(name)] = (int(fields[11]) + int(fields[12])) / _TICK  # (utime, stime: fields 14 and 15)
    return seconds


class PreparationClock:
    """Started in the preparing thread: ``seconds()`` is the wall time since, and ``alone()`` the estimate of what
    the same work takes with nothing beside it. ``others`` names the threads of preparations beside this one (a
    trial starts torch's and xla's together), whose CPU is theirs; the pools they start cannot be told from this
    one's and are counted, so the estimate errs toward the wall time, which a record kept before."""

    def __init__(self, others: Callable[[], set[int]] = set) -> None:
        self._wall, self._own = time.perf_counter(), time.thread_time()
        self._me, self._others = threading.get_native_id(), others
        self._before = _threads_cpu()

    def seconds(self) -> float:
        """Wall seconds since the clock started."""
        return time.perf_counter() - self._wall

    def alone(self) -> float:
        """The smaller of the wall time and the CPU time of this thread and of the threads started since that
        still run (a compiler's pool; where ``/proc`` cannot tell threads apart: the wall time)."""
        wall = self.seconds()
        if self._before is None:
            return wall
        after, others = _threads_cpu() or {}, self._others()
        started = sum(cpu for thread, cpu in after.items()
                      if thread not in self._before and thread != self._me and thread not in others)
        return min(wall, time.thread_time() - self._own + started)
