"""How often the interpreter lock changes hands while a background thread prepares an engine (imports it, traces
and compiles a step) beside the runs.

Why: a thread that waits for the lock asks for it after ``sys.getswitchinterval()`` (5 ms by default), and an
import waits for it after every file it stats or reads. Beside runs that hold the lock (the numpy engine on small
arrays spends its time in the interpreter) each of those waits took the full interval: in ``backend="auto"``'s
trial of a 1,010-op chain (``tests/bench/compile_scale.py``), the background ``import jax`` had not finished
after 10 s of runs (it takes 0.55 s alone), and no choice was made in 20 s. With the interval at
``BACKGROUND_SWITCH_SECONDS`` while the preparation runs, jax was imported and the step compiled within 4 s,
and xla chosen (0.41 ms a run against numpy's 3.4).
"""
from __future__ import annotations

import contextlib
import sys
import threading
from typing import Iterator

__all__ = ["BACKGROUND_SWITCH_SECONDS", "prompt_switching"]

BACKGROUND_SWITCH_SECONDS = 0.0005
"""The switch interval while a background preparation runs (CPython's default is 0.005)."""

_lock = threading.Lock()
_active = 0
_saved: float | None = None


@contextlib.contextmanager
def prompt_switching() -> Iterator[None]:
    """Run the ``with`` (a background preparation) with the switch interval at ``BACKGROUND_SWITCH_SECONDS`` at
    most; the interval the process had comes back when the last such block ends, unless someone set another
    meanwhile."""
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
