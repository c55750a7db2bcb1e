"""Pairs of ops one ATen call serves: two ops of a block with the same inputs (slot by slot) and attrs whose
kernels the engine has as one (``kernels.JOINT``: a convolution's input and filter gradients are one
``convolution_backward``). The pair runs as one step at the first op's place, so the second op's output exists
a little earlier; that is safe only when nothing in between writes the shared inputs or touches that output.
"""
from __future__ import annotations

from typing import Sequence

from .kernels import JOINT

__all__ = ["pairs"]

_FIRSTS = {first for first, _ in JOINT}


def _partner(block, order: Sequence[int], at: int) -> int | None:
    """The op after ``order[at]`` it may share a step with, or None."""
    first = block.ops[order[at]]
    inputs = set(first.input_arg_names)
    for i in order[at + 1:]:
        op = block.ops[i]
        if (first.type, op.type) in JOINT and op.inputs == first.inputs and op.attrs == first.attrs:
            outs = set(op.output_arg_names)
            between = [block.ops[k] for k in order[at + 1:order.index(i)]]
            if outs & inputs or any(outs & {*b.input_arg_names, *b.output_arg_names} for b in between):
                return None
            return i
        if inputs & set(op.output_arg_names):  # the shared inputs change: no later op shares the first's values
            return None
    return None


def pairs(block, order: Sequence[int]) -> dict[int, int]:
    """first op index -> second op index, for each pair of ops in ``order`` (op indexes, in run order) that may
    run as one step; each op in at most one pair."""
    found: dict[int, int] = {}
    taken: set[int] = set()
    for at, i in enumerate(order):
        if i in taken or block.ops[i].type not in _FIRSTS:
            continue
        j = _partner(block, order, at)
        if j is not None and j not in taken:
            found[i] = j
            taken.update((i, j))
    return found
