"""What changes while a background thread prepares an engine (imports it, traces and compiles a step) beside the
runs: how often the interpreter lock changes hands, and how many cores the runs' thread pools take.

The switch interval. A thread that waits for the lock asks for it after ``sys.getswitchinterval()`` (5 ms by
default), and an import waits for it after every file it stats or reads. Beside runs that hold the lock (the
numpy engine on small arrays spends its time in the interpreter) each of those waits took the full interval: in
``backend="auto"``'s trial of a 1,010-op chain (``tests/bench/compile_scale.py``), the background ``import jax``
had not finished after 10 s of runs (it takes 0.55 s alone), and no choice was made in 20 s. With the interval
at ``BACKGROUND_SWITCH_SECONDS`` while the preparation runs, jax was imported and the step compiled within 4 s,
and xla chosen (0.41 ms a run against numpy's 3.4).

The cores. A preparation keeps a core busy, and this process's own CPU time is not other work to the core
meter (``cores.free_cores``), so the runs beside it sized their BLAS pools for both cores: one pool thread then
shares a core with the preparation, and every product waits for it. ``cores.cores_for_runs`` counts each
preparation running (``preparations()``) as a core taken. Measured on the anchors' transformer block under
``backend="auto"`` (a replay of the anchors' harness, two pairs of processes): the numpy steps beside the
preparations took 420-1460 ms with two BLAS threads, one of them 2.95 s, against 325-610 ms with one; the step
time the harness sizes its rounds by was 880-1050 ms against 250-290, and the trial chose torch in the
second round instead of not at all in nine.
"""
from __future__ import annotations

import contextlib
import sys
import threading
from typing import Iterator

__all__ = ["BACKGROUND_SWITCH_SECONDS", "background_preparation", "preparations"]

BACKGROUND_SWITCH_SECONDS = 0.0005
"""The switch interval while a background preparation runs (CPython's default is 0.005)."""

_lock = threading.Lock()
_active = 0
_saved: float | None = None


@contextlib.contextmanager
def background_preparation() -> Iterator[None]:
    """Run the ``with`` (a background preparation) counted in ``preparations()``, with the switch interval at
    ``BACKGROUND_SWITCH_SECONDS`` at most; the interval the process had comes back when the last such block ends,
    unless someone set another meanwhile."""
    global _active, _saved
    with _lock:
        if _active == 0:
            _saved = sys.getswitchinterval()
            if _saved > BACKGROUND_SWITCH_SECONDS:
                sys.setswitchinterval(BACKGROUND_SWITCH_SECONDS)
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _saved is not None:
                if abs(sys.getswitchinterval() - min(_saved, BACKGROUND_SWITCH_SECONDS)) < 2e-6:  # ours, not the user's
                    sys.setswitchinterval(_saved)
                _saved = None


def preparations() -> int:
    """How many background preparations run now."""
    return _active
