"""Lowerings of the manipulation ops that do not state their math over ``xp``
(``backend/numpy/kernels/manipulation.py``), computing what those kernels compute: slices (at the index every engine
takes: ``shared/manipulation``), and ``gather``, whose index out of range fails the run as numpy raises
(``indexing.in_range``). The others are derived from their ``compute`` (``derived``).
"""
from __future__ import annotations

from ...shared.attrs import op_axis, rank_of
from ...shared.manipulation import slice_index
from .indexing import in_range, take_rows

__all__ = ["LOWERINGS"]


def _slice(op, ctx):
    index = slice_index((0,) * rank_of(op), op.attr("axes"), op.attr("starts"), op.attr("ends"), op.attr("strides"))
    return lambda x: x[index]  # static bounds, clamped as python slicing clamps them


def _gather(op, ctx):
    axis = op_axis(op)

    def run(x, index):
        return take_rows(x, in_range(ctx, index, x.shape[axis], "gather"), axis)

    return run


LOWERINGS = {"slice": _slice, "gather": _gather}
