"""The backward pass and the cyclic garbage collector: paused during the pass, its survivors handed to the oldest
generation afterwards, and a full collection once enough has been handed over.

The pass allocates many small objects that all stay alive as program. Left to the collector, the first young
collection after the pass would scan all of them, and the next one again (24-270 ms after a 16k-op pass of
0.7-1.1 s); ``paused`` moves them to the oldest generation instead. But CPython starts a full collection only when
the objects its young collections moved there exceed a quarter of those its last full one kept, and objects moved
by ``gc.freeze``/``gc.unfreeze`` are not counted: a process that built programs in a loop made no full collection
in 400 programs, and the reference cycles of the programs it dropped (a block knows its program, a var its block)
stayed, 0.2 MiB a program. So ``paused`` counts what it moves and makes the full collection itself
(``FULL_WHEN_MOVED_OVER``).
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

__all__ = ["paused"]

FULL_WHEN_MOVED_OVER = 1.0
"""A full collection once the objects moved to the oldest generation since the last one exceed this share of those
that survived it. CPython's own share is a quarter, but the pass's objects reach the oldest generation at once,
the soon dropped among them, where CPython's young collections would have freed some first: with a quarter, 400
three-piece random programs built and run in a loop made 39 full collections (CPython alone 10) and a 16k-op pass
made one within it (1.03-1.07 s against 0.61-0.86); with 1, 9 and none, memory flat."""


@dataclass
class _Moved:
    """What ``paused`` moved to the oldest generation since the last full collection it knows of."""

    objects: int = 0
    survivors: int | None = None
    """The objects the collector tracked after the last full collection ``paused`` made (before the first: when
    it first moved objects)."""
    full_collections: int = 0
    """``gc.get_stats()[2]["collections"]`` when ``objects`` was last counted from 0."""


_moved = _Moved()


@contextmanager
def paused() -> Iterator[None]:
    """Run the body with the cyclic collector paused; then move what it allocated to the oldest generation, and make
    a full collection once ``FULL_WHEN_MOVED_OVER`` asks for one. Moves nothing when the collector was off already,
    or when objects are frozen already (``gc.unfreeze`` would release those too)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            _move_survivors()
            gc.enable()


def _move_survivors() -> None:
    if gc.get_freeze_count():
        return
    full = gc.get_stats()[2]["collections"]
    if full != _moved.full_collections:  # CPython made one since: it counts from there
        _moved.objects, _moved.full_collections = 0, full
    if _moved.survivors is None:
        _moved.survivors = len(gc.get_objects())  # a walk over every tracked object: once, and after a collection
    _moved.objects += gc.get_count()[0]  # allocations since the last young collection: the pass's objects, about
    gc.freeze()
    gc.unfreeze()
    if _moved.objects > FULL_WHEN_MOVED_OVER * _moved.survivors:
        gc.collect()
        _moved.objects, _moved.survivors = 0, len(gc.get_objects())
        _moved.full_collections = gc.get_stats()[2]["collections"]
