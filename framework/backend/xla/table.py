"""The lowering table: op type -> lowering, gathered from one module per family (as the kernels are), and the
op types the backend leaves to the host or refuses, each with its reason.

``problems(block)`` lists every op of a block (sub-blocks included) that the backend cannot run, so a program
is refused whole, before anything runs, with every reason at once.
"""
from __future__ import annotations

from typing import Callable, Mapping

from ..derive import with_derived
from .lower_derived import derived_lowering
from . import (lower_collective, lower_control, lower_conv, lower_math, lower_metrics, lower_nn, lower_optim,
               lower_recurrent, lower_tensor)

__all__ = ["FAMILIES", "LOWERINGS", "REFUSED", "problems"]

FAMILIES = (lower_math, lower_tensor, lower_nn, lower_conv, lower_optim, lower_control, lower_recurrent,
            lower_collective, lower_metrics)


def _collect() -> dict:
    table: dict = {}
    for family in FAMILIES:
        for op_type, lowering in family.LOWERINGS.items():
            if op_type in table:
                raise RuntimeError(f"op type '{op_type}' has two xla lowerings ({family.__name__})")
            table[op_type] = lowering
    return table


LOWERINGS: Mapping[str, Callable] = with_derived(_collect(), derived_lowering, "xla lowering")
"""op type -> ``lowering(op, ctx) -> fn`` (``context``): derived from the op's ``compute`` (``lower_derived``),
or the family modules' own."""

REFUSED: Mapping[str, str] = {}
"""op type -> why the xla backend does not run it (the error names the ops and says this)."""


def problems(block) -> list[str]:
    """Every op of ``block`` and its sub-blocks that the xla backend cannot run, as one line each."""
    from gradgen.program.describe import op_location

    found = []
    for b in _blocks_under(block):
        for index, op in enumerate(b.ops):
            if op.type in LOWERINGS:
                continue
            reason = REFUSED.get(op.type, "no xla lowering is written for this op type (user ops registered with "
                                          "register_op run on the numpy backend only)")
            found.append(f"{op_location(b, index, op.type, op.callsite)}: {reason}")
    return found


def _blocks_under(block) -> list:
    """``block`` and every block nested in it (the program's blocks whose parent chain reaches it)."""
    def inside(b) -> bool:
        while b is not None:
            if b is block:
                return True
            b = b.parent
        return False

    return [b for b in block.program.blocks if inside(b)]
