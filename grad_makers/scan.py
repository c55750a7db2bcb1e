"""Gradients of running and whole products and sums: cumsum, and reduce_prod exactly at zeros.

reduce_prod's gradient is, for each element, the product of all the others.
Dividing the product by the element fails at zeros (one zero: only that
element has a gradient; two: none has), so the others' product is built as
an exclusive running product from the left times one from the right, each a
log-depth scan of ``slice``, ``pad`` (with ones) and ``elementwise_mul``.
That is a polynomial in x made of ops with exact gradients, so second and
higher orders are exact too, with any number of zeros. The scan needs the
reduced size at compile time.
"""
from __future__ import annotations

import numpy as np

from gradgen.program.shapes import numel

from .base import grad_maker
from .builder import RuleError
from .families import linear, reduced_axes, reduction

BIG = 2 ** 62
"""A slice end past any dim (slicing clamps it)."""

cumsum_grad = linear("cumsum", emits=("cumsum",), transpose=lambda g, dout, axis, exclusive, reverse: g.op(
    "cumsum", {"X": dout}, {"axis": axis, "exclusive": exclusive, "reverse": not reverse}))
"""Running sums are linear; their adjoint runs the other way (exclusive stays exclusive)."""


def _slice(g, x, axis: int, start: int, end: int):
    return g.op("slice", {"X": x}, {"axes": [axis], "starts": [start], "ends": [end]})


def _pad_ones(g, x, rank: int, axis: int, before: int, after: int):
    pads = [0] * (2 * rank)
    pads[2 * axis], pads[2 * axis + 1] = before, after
    return g.op("pad", {"X": x}, {"paddings": pads, "pad_value": 1.0})


def exclusive_cumprod(g, x, rank: int, axis: int, size: int, reverse: bool):
    """prod of x[i] over i < k (i > k when ``reverse``) for each k along ``axis``: Hillis-Steele doubling."""
    def shifted(v, d):  # v moved d places along the scan, ones coming in
        if reverse:
            return _pad_ones(g, _slice(g, v, axis, d, BIG), rank, axis, 0, d)
        return _pad_ones(g, _slice(g, v, axis, 0, -d), rank, axis, d, 0)

    acc, d = shifted(x, 1), 1
    while d < size - 1:
        acc, d = g.mul(acc, shifted(acc, d)), 2 * d
    return acc


def others_product(g, op, x):
    """For each element of ``x``, the product of the other elements it was reduced with."""
    shape, axes = op.shape(x), reduced_axes(op)
    size = numel([shape[a] for a in axes])
    if size < 0:
        raise RuleError(f"reduce_prod's gradient needs the sizes of the reduced dims {axes} at compile time, "
                        f"got {list(shape)}")
    if size == 0:
        return g.fill_zeros_like(x)
    if len(axes) == 1:
        a = axes[0]
        return g.mul(exclusive_cumprod(g, x, len(shape), a, size, False),
                     exclusive_cumprod(g, x, len(shape), a, size, True))
    kept = [a for a in range(len(shape)) if a not in axes]
    moved = g.transpose(x, kept + axes)  # reduced dims last, then flattened into one
    flat = g.op("reshape", {"X": moved}, {"shape": [0] * len(kept) + [size]})
    rank = len(kept) + 1
    others = g.mul(exclusive_cumprod(g, flat, rank, rank - 1, size, False),
                   exclusive_cumprod(g, flat, rank, rank - 1, size, True))
    return g.transpose(g.reshape_as(others, moved), [int(i) for i in np.argsort(kept + axes)])


reduce_prod_grad = reduction(
    "reduce_prod", emits=("unsqueeze", "slice", "pad", "elementwise_mul", "transpose", "reshape", "reshape_as",
                          "fill_zeros_like"),
    rule=lambda g, x, out, dout, op: g.mul(dout, others_product(g, op, x)))

__all__ = ["cumsum_grad", "reduce_prod_grad", "exclusive_cumprod", "others_product", "BIG"]
