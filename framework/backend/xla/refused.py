"""Which ops of a block the xla backend cannot run, each with its reason, so a program is refused whole, before
anything runs, with every reason at once (``problems``)."""
from __future__ import annotations

from typing import Mapping

from .lowerings import LOWERINGS

__all__ = ["REFUSED", "problems"]

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
