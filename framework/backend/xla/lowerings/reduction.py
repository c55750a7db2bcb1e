"""Lowerings of the reductions that do not state their math over ``xp`` (``program/ops/reduction.py``; the others
are derived, ``derived``): what the numpy kernels compute, over the axes they read (``shared/reduction.axes_of``),
in the same dtypes."""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from ...shared.attrs import rank_of
from ...shared.reduction import axes_of

__all__ = ["LOWERINGS"]








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






LOWERINGS = {"prod_others": _prod_others}
