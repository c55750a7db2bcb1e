"""The commit's one guarantee, shared by every backend: a KeyboardInterrupt lands before the scope is touched or
after it is fully updated, never in between (``held_interrupts`` around the in-place writes and the one
``Scope.update``)."""
from __future__ import annotations

import _signal  # signal's C module: ``signal.signal`` wraps every call in enum conversions (7 us a run)
import threading
from contextlib import contextmanager
from typing import Iterator

__all__ = ["held_interrupts"]

_holding = [False]
"""Whether the main thread is inside a ``held_interrupts`` (which then holds for any nested one)."""


@contextmanager
def held_interrupts() -> Iterator[None]:
    """Inside the ``with``, a SIGINT (or ``_thread.interrupt_main``) waits; it is delivered right after.

    Only the main thread receives KeyboardInterrupt, and only there can the handler be swapped; elsewhere
    there is nothing to hold back. A handler that is not a Python callable (default or ignored) is left alone.
    Inside another ``held_interrupts`` it does nothing more: the outer one delivers.
    """
    if threading.current_thread() is not threading.main_thread() or _holding[0]:
        yield
        return
    previous = _signal.getsignal(_signal.SIGINT)
    if not callable(previous):
        yield
        return
    arrived: list = []
    _signal.signal(_signal.SIGINT, lambda signum, frame: arrived.append(frame))
    _holding[0] = True
    try:
        yield
    finally:
        _holding[0] = False
        _signal.signal(_signal.SIGINT, previous)
        if arrived:
            previous(_signal.SIGINT, arrived[0])
