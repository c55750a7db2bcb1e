"""What recompute would save: the backward part rebuilt with and without checkpoints, and both peaks.

The page's memory sentence ends with this when activations kept for the
backward pass dominate the peak. Both peaks are of the same rebuilt program
(the forward part plus ``append_backward``, no optimizer), so they compare
like with like; the checkpoints are ``evenly_spaced_checkpoints`` of the
activations the backward part reads, about sqrt(n) of them.
"""
from __future__ import annotations

from typing import Mapping, NamedTuple, Sequence

from gradgen.program.errors import GradgenError

from ...passes.backward import append_backward
from ...passes.recompute import evenly_spaced_checkpoints
from ..memory import analyze_memory
from ..var_kinds import block_kinds


class RecomputeWhatIf(NamedTuple):
    checkpoints: list[str]
    peak_without: int
    peak_with: int


def _forward_clone(program):
    """A copy of ``program`` with only the forward ops of its global block."""
    copy = program.clone()
    block = copy.global_block()
    for i in range(len(block.ops) - 1, -1, -1):
        if block.ops[i].role != "forward":
            block.remove_op(i)
    return copy


def recompute_what_if(program, feed_shapes: Mapping[str, Sequence[int]], loss: str) -> RecomputeWhatIf | None:
    """The peak of ``loss``'s backward pass with and without checkpoints; None when it cannot be rebuilt
    (no trainable parameter reaches the loss, fewer than four activations, or the rewrite refuses)."""
    kinds = block_kinds(program.global_block()).made
    order = [n for op in program.global_block().ops if op.role == "forward" for n in op.output_arg_names]
    activations = [n for n in order if kinds.get(n) == "activation" and n != loss]
    if len(activations) < 4:
        return None
    peaks = []
    try:
        for checkpoints in (None, evenly_spaced_checkpoints(activations)):
            copy = _forward_clone(program)
            target = copy.global_block().var(loss)
            if not append_backward(target, checkpoints=checkpoints):
                return None
            peaks.append(analyze_memory(copy, feed_shapes, [loss]).peak_bytes)
    except (GradgenError, ValueError):
        return None
    return RecomputeWhatIf(evenly_spaced_checkpoints(activations), peaks[0], peaks[1])


__all__ = ["RecomputeWhatIf", "recompute_what_if"]
