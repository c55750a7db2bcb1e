"""Time a run spends on one-time measurements of its engine (the torch engine's product calibration: a wait for
the thread pools and a few timed products, ~0.2 s, at the first run of each thread count), told apart from the
run's own time: ``backend="auto"``'s trial times runs, and a run that calibrated is not a slower run of the
engine. Measured: in a logged trial of the anchors' transformer, the first torch run at two threads (when xla's
background compile ended and the free-core meter gave the runs both cores) took 277 ms against 85-90 before and
after; a block whose first timed runs are that far behind leaves the contest (``trial_rules.CUT_RATIO``).
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Iterator

__all__ = ["one_time", "spent"]

_local = threading.local()
_now = time.perf_counter
"""The clock one-time work is timed by: the one ``backend="auto"`` times runs by."""


@contextmanager
def one_time() -> Iterator[None]:
    """Count the ``with`` block's seconds as this thread's one-time work."""
    start = _now()
    try:
        yield
    finally:
        _local.seconds = spent() + _now() - start


def spent() -> float:
    """Seconds of one-time work this thread has done so far (compare two readings around a run)."""
    return getattr(_local, "seconds", 0.0)
