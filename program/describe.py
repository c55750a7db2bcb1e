"""Phrases that error messages share: where an op is, and what its vars are."""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

if TYPE_CHECKING:
    from .block import Block


def op_location(block: "Block", index: int, op_type: str, callsite: str | None = None) -> str:
    """``block 0, op #3 (matmul), created at model.py:12``."""
    text = f"block {block.idx}, op #{index} ({op_type})"
    return f"{text}, created at {callsite}" if callsite else text


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
