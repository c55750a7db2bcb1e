"""Lowerings of the reductions (``backend/numpy/kernels/reduction.py``): ``jax.numpy`` one-liners computing what
those kernels compute, over the axes they read (``shared/reduction.axes_of``), in the same dtypes."""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from ...shared.attrs import out_dtype, rank_of
from ...shared.reduction import axes_of

__all__ = ["LOWERINGS"]


def _reducer(fn, accumulates: bool = False):
    def factory(op, ctx):
        rank = rank_of(op)
        axis, keep, dtype = axes_of(op, rank), op.attr("keep_dim"), out_dtype(op)
        if accumulates:
            return lambda x: fn(x, axis=axis, keepdims=keep, dtype=dtype)
        return lambda x: fn(x, axis=axis, keepdims=keep).astype(dtype)

    return factory


def _reduce_extreme(fn):
    """max/min: numpy raises on an empty reduction; so does the trace (a zero-size axis is static here)."""
    def factory(op, ctx):
        rank = rank_of(op)
        axis, keep = axes_of(op, rank), op.attr("keep_dim")

        def run(x):
            reduced = range(x.ndim) if axis is None else axis
            if any(x.shape[a] == 0 for a in reduced):
                raise ValueError(f"zero-size array to reduction operation {fn.__name__} which has no identity")
            return fn(x, axis=axis, keepdims=keep)

        return run

    return factory


def _mean_all(x, axis=None, keepdims=False, dtype=None):
    return jnp.mean(x, axis=axis, keepdims=keepdims, dtype=dtype)


def _logsumexp(op, ctx):
    rank = rank_of(op)
    axis, keep = axes_of(op, rank), op.attr("keep_dim")

    def run(x):
        top = jnp.max(x, axis=axis, keepdims=True, initial=-jnp.inf)
        top = jnp.where(jnp.isfinite(top), top, 0.0).astype(x.dtype)
        out = jnp.log(jnp.sum(jnp.exp(x - top), axis=axis, keepdims=True)) + top
        return (out if keep else jnp.squeeze(out, axis=axis)).astype(x.dtype)

    return run


def _prod_others(op, ctx):
    """The product of every other element of each reduced slice, by exclusive running products from both ends
    (no division: zeros are exact), as the numpy kernel."""
    rank = rank_of(op)
    axes = axes_of(op, rank)
    axes = list(range(rank)) if axes is None else sorted(axes)
    kept = [a for a in range(rank) if a not in axes]
    back = tuple(int(i) for i in np.argsort(kept + axes))

    def exclusive(flat):
        ones = jnp.ones(flat.shape[:-1] + (1,), flat.dtype)
        return jnp.cumprod(jnp.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1, dtype=flat.dtype)

    def run(x):
        moved = jnp.transpose(x, kept + axes)
        size = math.prod(x.shape[a] for a in axes)
        if size == 0:
            return jnp.zeros_like(x)
        flat = moved.reshape(moved.shape[:len(kept)] + (size,))
        others = exclusive(flat) * jnp.flip(exclusive(jnp.flip(flat, -1)), -1)
        return jnp.transpose(others.reshape(moved.shape), back)

    return run


def _mean(op, ctx):
    dtype = out_dtype(op)
    return lambda x: jnp.mean(x, dtype=dtype)


def _reduce_mean_grad(op, ctx):
    rank = rank_of(op)
    axis, keep = axes_of(op, rank), op.attr("keep_dim")
    axes = tuple(range(rank)) if axis is None else axis

    def run(x, dout):
        count = max(math.prod(x.shape[a] for a in axes), 1)
        g = dout if keep else jnp.expand_dims(dout, axes)
        return jnp.broadcast_to(g / count, x.shape).astype(dout.dtype)

    return run


LOWERINGS = {
    "reduce_sum": _reducer(jnp.sum, accumulates=True), "reduce_mean": _reducer(_mean_all, accumulates=True),
    "reduce_max": _reduce_extreme(jnp.max), "reduce_min": _reduce_extreme(jnp.min),
    "reduce_prod": _reducer(jnp.prod), "logsumexp": _logsumexp, "prod_others": _prod_others, "mean": _mean,
    "reduce_mean_grad": _reduce_mean_grad,
}
