"""Phrases that error messages share: where an op is, and what its vars are."""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

if TYPE_CHECKING:
    from .block import Block

__all__ = ["op_location", "OpPlace", "describe_var", "describe_slots"]


def op_location(block: "Block", index: int, op_type: str, callsite: str | None = None) -> str:
    """``block 0, op #3 (matmul), created at model.py:12``."""
    text = f"block {block.idx}, op #{index} ({op_type})"
    return f"{text}, created at {callsite}" if callsite else text


class OpPlace:
    """Where ``op`` is, as ``op_location`` says it, formatted only when a message shows it.

    Finding an op's index is a linear search, so checks that usually pass carry this instead of a string.
    """

    __slots__ = ("op",)

    def __init__(self, op):
        self.op = op

    def __str__(self) -> str:
        op = self.op
        return op_location(op.block, op.idx, op.type, op.callsite)


def describe_var(block: "Block", name: str) -> str:
    """``x: float64[64, 1000]``, or ``x: <undefined>`` when no block declares it."""
    var = block.find_var(name)
    return f"{name}: {var.type_str()}" if var is not None else f"{name}: <undefined>"


def describe_slots(block: "Block", slots: Mapping[str, Sequence[str]]) -> str:
    """``X=x: float64[64, 1000], Y=w: float64[1000, 100]``."""
    parts = []
    for slot, names in slots.items():
        shown = ", ".join(describe_var(block, n) for n in names)
        parts.append(f"{slot}=[{shown}]" if len(names) != 1 else f"{slot}={shown}")
    return ", ".join(parts) if parts else "no inputs"
