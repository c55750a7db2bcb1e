"""Lowerings of the ops that move or regroup elements, plus n-ary sum (``backend/numpy/kernels/manipulation.py``),
computing what those kernels compute: reshapes, reorders, joins and cuts, slices (at the index every engine takes:
``shared/manipulation``), and ``gather``, whose index out of range fails the run as numpy raises
(``indexing.in_range``).
"""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from gradgen.program.shapes import unsqueezed

from ...shared.attrs import op_axis, out_dtype, rank_of
from ...shared.manipulation import section_sizes, slice_index, summed_to_shape
from .indexing import in_range, take_rows

__all__ = ["LOWERINGS", "pieces"]


def _sum(op, ctx):
    dtype = out_dtype(op)

    def run(*xs):
        total = xs[0]
        for x in xs[1:]:
            total = total + x
        return jnp.asarray(total).astype(dtype)

    return run


def _reduce_as(op, ctx):
    return lambda x, target: summed_to_shape(x, target.shape)


def _broadcast_to(op, ctx):
    if op.input("ShapeLike"):
        return lambda x, like: jnp.broadcast_to(x, like.shape)
    shape = tuple(op.attr("shape"))
    return lambda x: jnp.broadcast_to(x, shape)


def _squeeze(op, ctx):
    axes = tuple(op.attr("axes"))
    if not axes:
        return lambda x: jnp.reshape(x, tuple(d for d in x.shape if d != 1))
    rank = rank_of(op)
    drop = tuple(sorted({a % rank for a in axes}))
    return lambda x: jnp.squeeze(x, axis=drop)  # refuses a named axis whose size is not 1, as numpy


def _unsqueeze(op, ctx):
    axes = op.attr("axes")
    return lambda x: jnp.reshape(x, unsqueezed(x.shape, axes))


def _stack(op, ctx):
    axis, dtype = op.attr("axis"), out_dtype(op)
    return lambda *xs: jnp.stack(xs, axis=axis).astype(dtype)


def pieces(x, axis: int, sizes):
    """``x`` cut along ``axis`` into consecutive pieces of ``sizes`` (the last taking the rest), one value if
    there is a single piece."""
    lead, bounds = (slice(None),) * (axis % x.ndim), np.cumsum([0, *sizes])
    stops = [*bounds[1:-1], None]
    cut = [x[lead + (slice(int(a), None if b is None else int(b)),)] for a, b in zip(bounds[:-1], stops)]
    return cut[0] if len(cut) == 1 else tuple(cut)


def _split(op, ctx):
    axis, sections = op_axis(op), list(op.attr("sections"))

    def run(x):
        sizes = section_sizes(sections, x.shape[axis], axis)
        return pieces(x, axis, sizes)

    return run


def _slice(op, ctx):
    index = slice_index((0,) * rank_of(op), op.attr("axes"), op.attr("starts"), op.attr("ends"), op.attr("strides"))
    return lambda x: x[index]  # static bounds, clamped as python slicing clamps them


def _pad(op, ctx):
    pads, value = op.attr("paddings"), op.attr("pad_value")
    widths = tuple((pads[2 * i], pads[2 * i + 1]) for i in range(len(pads) // 2))
    if not widths:
        return lambda x: x
    if min(min(w) for w in widths) < 0:
        raise ValueError(f"index can't contain negative values (paddings {pads})")
    return lambda x: jnp.pad(x, widths, constant_values=jnp.asarray(value).astype(x.dtype))


def _gather(op, ctx):
    axis = op_axis(op)

    def run(x, index):
        return take_rows(x, in_range(ctx, index, x.shape[axis], "gather"), axis)

    return run


def _flatten(op, ctx):
    rank = rank_of(op)
    axis = op.attr("axis") + rank if op.attr("axis") < 0 else op.attr("axis")
    return lambda x: jnp.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))


LOWERINGS = {
    "sum": _sum, "reduce_as": _reduce_as, "broadcast_to": _broadcast_to,
    "flatten": _flatten,
    "split": _split, "slice": _slice,
    "squeeze": _squeeze, "unsqueeze": _unsqueeze, "stack": _stack, "gather": _gather, "pad": _pad,
}
