"""How deep control flow nests, and making room for it on Python's stack.

Printing, verifying, differentiating and running a program recurse once (a
few dozen Python frames) per level of nested control flow, so a program
nested 200 deep needs more than Python's default limit of 1000 frames. Each
time a block is created (by a builder, a pass or the loader) the recursion
limit is raised, if needed, to cover the new depth: ``FRAMES_PER_LEVEL`` per
level on top of the limit Python started with. It is only ever raised, never
lowered (another thread may be deep inside a program). Nesting deeper than
``MAX_NESTING`` levels is refused with one clear error instead.
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from .errors import ProgramError

if TYPE_CHECKING:
    from .program import Program

__all__ = ["MAX_NESTING", "FRAMES_PER_LEVEL", "block_depth", "make_room_for"]

MAX_NESTING = 500
"""Deepest control-flow nesting gradgen accepts (block 0 is depth 0)."""

FRAMES_PER_LEVEL = 30
"""Python frames reserved per nesting level: the backward pass uses about 15, the executor fewer."""

_STARTING_LIMIT = sys.getrecursionlimit()


def block_depth(program: "Program", idx: int) -> int:
    """How many blocks enclose block ``idx`` (0 for the global block)."""
    depth = 0
    while idx > 0:
        idx = program.blocks[idx].parent_idx
        depth += 1
    return depth


def make_room_for(depth: int, where: str) -> None:
    """Raise Python's recursion limit to cover ``depth`` levels of nesting, or refuse past ``MAX_NESTING``."""
    if depth > MAX_NESTING:
        raise ProgramError(f"{where}: control flow nested {depth} levels deep; gradgen supports up to "
                           f"{MAX_NESTING} (each level costs Python stack in every pass over the program)")
    wanted = _STARTING_LIMIT + FRAMES_PER_LEVEL * depth
    if sys.getrecursionlimit() < wanted:
        sys.setrecursionlimit(wanted)
