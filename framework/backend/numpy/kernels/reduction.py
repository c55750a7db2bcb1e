"""Reduction kernels."""
from __future__ import annotations

import numpy as np

from ...shared.reduction import axes_of


def _promoted(op) -> np.dtype | None:
    """The dtype the schema declared for Out where it is not X's (a sum of int32 is int64, a mean of ints
    float64), else None: numpy's own accumulator then stays (float16 adds up in float32)."""
    out, x = op.block.var(op.output("Out")[0]).dtype, op.block.var(op.input("X")[0]).dtype
    return None if out == x else np.dtype(out)


def mean_of(x: np.ndarray, axis=None, keepdims: bool = False, dtype=None) -> np.ndarray:
    """``np.mean``, except over no elements: every mean there is of an empty slice, NaN (numpy's value), made
    directly, since 0 / 0 is the answer for an empty input, not a mishap numpy should warn about."""
    if x.size:
        return np.mean(x, axis=axis, keepdims=keepdims, dtype=dtype)
    shape = np.sum(x, axis=axis, keepdims=keepdims).shape
    return np.full(shape, np.nan, dtype or (x.dtype if x.dtype.kind == "f" else np.float64))


def _reducer(fn, accumulates: bool = False):
    """A reduction kernel; one that ``accumulates`` (sum, mean) adds up in the declared dtype."""
    def factory(op):
        rank = len(op.block.var(op.input("X")[0]).shape)
        axis, keep = axes_of(op, rank), op.attr("keep_dim")
        if accumulates:
            dtype = _promoted(op)
            return lambda x: np.asarray(fn(x, axis=axis, keepdims=keep, dtype=dtype))
        return lambda x: np.asarray(fn(x, axis=axis, keepdims=keep))

    return factory


def logsumexp(op):
    rank = len(op.block.var(op.input("X")[0]).shape)
    axis, keep = axes_of(op, rank), op.attr("keep_dim")

    def run(x):
        top = np.max(x, axis=axis, keepdims=True, initial=-np.inf)  # initial: no elements give -inf, not an error
        top = np.where(np.isfinite(top), top, 0.0).astype(x.dtype, copy=False)  # all -inf (or inf) rows: no shift
        with np.errstate(divide="ignore"):  # log(0) = -inf is the answer over no elements (or all -inf)
            out = np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True)) + top
        return np.asarray(out if keep else np.squeeze(out, axis=axis), dtype=x.dtype)

    return run


def prod_others(op):
    """Exclusive running products from both ends, multiplied: O(n) and no division, so zeros are exact."""
    rank = len(op.block.var(op.input("X")[0]).shape)
    axes = axes_of(op, rank)
    axes = list(range(rank)) if axes is None else sorted(axes)
    kept = [a for a in range(rank) if a not in axes]
    back = np.argsort(kept + axes)

    def exclusive(flat):
        ones = np.ones(flat.shape[:-1] + (1,), flat.dtype)
        return np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1, dtype=flat.dtype)

    def run(x):
        moved = np.transpose(x, kept + axes)
        size = int(np.prod([x.shape[a] for a in axes]))
        if size == 0:
            return np.zeros_like(x)
        flat = moved.reshape(moved.shape[:len(kept)] + (size,))
        others = exclusive(flat) * np.flip(exclusive(np.flip(flat, -1)), -1)
        return np.transpose(others.reshape(moved.shape), back).copy(order="C")  # not ascontiguousarray: 0-d stays 0-d

    return run


def mean(op):
    dtype = _promoted(op)
    return lambda x: np.asarray(mean_of(x, dtype=dtype))


def reduce_mean_grad(op):
    rank = len(op.block.var(op.input("X")[0]).shape)
    axis = axes_of(op, rank)
    keep = op.attr("keep_dim")
    axes = tuple(range(rank)) if axis is None else axis

    def run(x, dout):
        count = 1
        for a in axes:
            count *= x.shape[a]
        g = dout if keep else np.expand_dims(dout, axes)
        return np.broadcast_to(g / max(count, 1), x.shape).astype(dout.dtype, copy=True)

    return run


KERNELS = {
    "reduce_sum": _reducer(np.sum, accumulates=True),
    "reduce_mean": _reducer(mean_of, accumulates=True),
    "reduce_max": _reducer(np.max),
    "reduce_min": _reducer(np.min),
    "reduce_prod": _reducer(lambda x, axis, keepdims: np.prod(x, axis=axis, keepdims=keepdims, dtype=x.dtype)),
    "logsumexp": logsumexp,
    "prod_others": prod_others,
    "mean": mean,
    "reduce_mean_grad": reduce_mean_grad,
}
