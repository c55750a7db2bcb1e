"""A run of a program with collective ops on several ranks: the ranks agree on their feeds, and a failure ends them all.

One rank cannot recover alone from a failed run: the other ranks wait, or
will wait, in the collectives it never reaches, and MPI has no timeout. So a
run that fails on any rank reports that rank's error and aborts every rank
(the executor runs it under ``communicator.abort_on_error``), whether or not the script called ``init_parallel``
and even if it catches the exception.

Ranks fed different shapes (one given 3 rows where the others have 4) would
fail nowhere: each computes its shard's mean loss, the all-reduce averages
those means, and the result is not the whole batch's mean (the rows of the
smaller shard weigh more). So before each run the ranks gather their feeds'
shapes (one small all-gather, about the cost of one more bucket) and all
stop with the same ``DistributedError`` when they differ.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..errors import DistributedError
from .communicator import Communicator

__all__ = ["COLLECTIVE_OPS", "has_collectives", "check_equal_feeds"]

COLLECTIVE_OPS = frozenset({"allreduce_start", "allreduce_wait", "broadcast"})
"""Ops that wait for every rank (``program/ops/collective.py``)."""


def has_collectives(block) -> bool:
    """True when ``block`` holds an op that waits for the other ranks."""
    return any(op.type in COLLECTIVE_OPS for op in block.ops)


def _shapes(feed: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    return {name: tuple(np.shape(value)) for name, value in feed.items()}


def check_equal_feeds(comm: Communicator, feed: Mapping[str, Any]) -> None:
    """Raise the same ``DistributedError`` on every rank unless all ranks' feeds have equal names and shapes."""
    everyone = comm.allgather(_shapes(feed))
    first = everyone[0]
    if all(shapes == first for shapes in everyone):
        return
    for name in sorted(set().union(*everyone)):
        seen = [shapes.get(name) for shapes in everyone]
        if any(s != seen[0] for s in seen):
            held = ", ".join(f"rank {r}: {'not fed' if s is None else list(s)}" for r, s in enumerate(seen))
            raise DistributedError(
                f"the ranks were fed different shapes of '{name}' ({held}); every rank must get an equal shard, "
                "or averaging the ranks' gradients is not the whole batch's gradient (shard_feed splits a batch "
                "equally)")
