"""A run of a program with collective ops on several ranks: the ranks agree on their feeds, and a failure ends them all.

One rank cannot recover alone from a failed run: the other ranks wait, or
will wait, in the collectives it never reaches, and MPI has no timeout. So a
run that fails on any rank reports that rank's error and aborts every rank
(the executor runs it under ``communicator.abort_on_error``), whether or not the script called ``init_parallel``
and even if it catches the exception.

Ranks fed different shapes (one given 3 rows where the others have 4) would
fail nowhere: each computes its shard's mean loss, the all-reduce averages
those means, and the result is not the whole batch's mean (the rows of the
smaller shard weigh more). So each run starts a non-blocking all-reduce of
a fingerprint of its feeds' shapes, and before it commits, every rank stops
with the same ``DistributedError`` when they differ.
"""
from __future__ import annotations

import hashlib
from typing import Any, Callable, Mapping

import numpy as np

from ..errors import DistributedError
from .communicator import Communicator

__all__ = ["COLLECTIVE_OPS", "has_collectives", "start_feed_check"]

COLLECTIVE_OPS = frozenset({"allreduce_start", "allreduce_wait", "broadcast"})
"""Ops that wait for every rank (``program/ops/collective.py``)."""


def has_collectives(block) -> bool:
    """True when ``block`` holds an op that waits for the other ranks."""
    return any(op.type in COLLECTIVE_OPS for op in block.ops)


def _shapes(feed: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    return {name: tuple(np.shape(value)) for name, value in feed.items()}


def _digest(shapes: Mapping[str, tuple[int, ...]]) -> int:
    """A 63-bit fingerprint of the feeds' names and shapes, equal on every rank for equal feeds."""
    text = repr(sorted(shapes.items())).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little") >> 1


def start_feed_check(comm: Communicator, feed: Mapping[str, Any]) -> Callable[[], None]:
    """Start comparing every rank's feed names and shapes; return the check to call before the run commits.

    The comparison is one non-blocking all-reduce of two integers (the
    fingerprint's maximum and minimum over the ranks), which the run's own
    collectives move along, so a run does not wait for it. The check raises
    the same ``DistributedError`` on every rank when the feeds differ.
    """
    if comm.size == 1:
        return _agreed
    shapes = _shapes(feed)
    digest = _digest(shapes)
    send = np.array([digest, -digest], np.int64)
    recv = np.empty_like(send)
    request = comm.start_max(send, recv)

    def check() -> None:
        comm.wait(request)
        if recv[0] != -recv[1]:  # the largest fingerprint is not the smallest: some rank's feeds differ
            _explain(comm.allgather(shapes))

    return check


def _agreed() -> None:
    """The check of a world of one rank: it always agrees with itself."""


def _explain(everyone: list[dict[str, tuple[int, ...]]]) -> None:
    """Raise the error naming the first feed whose shape differs between ranks, and each rank's shape of it."""
    for name in sorted(set().union(*everyone)):
        seen = [shapes.get(name) for shapes in everyone]
        if any(s != seen[0] for s in seen):
            held = ", ".join(f"rank {r}: {'not fed' if s is None else list(s)}" for r, s in enumerate(seen))
            raise DistributedError(
                f"the ranks were fed different shapes of '{name}' ({held}); every rank must get an equal shard, "
                "or averaging the ranks' gradients is not the whole batch's gradient (shard_feed splits a batch "
                "equally)")
