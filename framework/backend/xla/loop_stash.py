"""The xla side of a gradient loop reading its forward loop's body back (``runtime/loop_read_back`` decides
which ops): the forward loop's stash, row ``t`` written in iteration ``t``, and the stand-ins that make the reverse
body's read-back ops yield the rows read back instead of computing. Stashed values no reverse op reads are
dropped by XLA with their buffers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ...runtime.loop_read_back import Replay

__all__ = ["ReadBack", "Stash", "read_back_block", "stash_read", "stashes"]


@dataclass
class Stash:
    """A traced forward loop's stash: by var name, ``row(t)`` -> the var's value in iteration ``t``; its Steps and
    its outer values."""

    rows: dict[str, Callable[[Any], Any]]
    steps: Any
    outer: dict[str, Any]


def stashes(ctx) -> dict[tuple, Stash]:
    """The stashes of the loops traced so far in ``ctx``'s trace, by the loop's History names."""
    found = getattr(ctx, "_loop_stashes", None)
    if found is None:
        found = {}
        object.__setattr__(ctx, "_loop_stashes", found)
    return found


class ReadBack:
    """Stands for op ``origin`` of a reverse body while it is traced: its outputs are ``values`` (rows read back
    from the stash), through the ``stash_read`` lowering; errors and provenance still name ``origin``'s place."""

    type = "stash_read"

    def __init__(self, origin, values: dict[str, Any]):
        self.origin, self.values = origin, values
        self.callsite = origin.callsite
        self.output_arg_names = origin.output_arg_names
        self.input_arg_names: list[str] = []


class _ReadBackBlock:
    """``block`` with some ops replaced by ``ReadBack``s (everything else is the block's own)."""

    def __init__(self, block, ops: list):
        self._block, self.ops = block, ops

    def __getattr__(self, name: str):
        return getattr(self._block, name)


def read_back_block(block, plan: Replay, values: dict[str, Any]):
    """``block`` (a reverse body) with ``plan``'s ops, and its History reads, yielding ``values`` instead of
    computing them (the History rows unchecked: linked, the row is below the forward loop's Steps)."""
    replaced = {j for _, j in plan.pairs} | {j for j, _ in plan.rows}
    return _ReadBackBlock(block, [ReadBack(op, values) if j in replaced else op for j, op in enumerate(block.ops)])


def stash_read(op, ctx):
    """The lowering of a ``ReadBack``: the values read back, in its origin's output order."""
    values = [op.values[n] for n in op.output_arg_names]
    return lambda: values[0] if len(values) == 1 else tuple(values)
