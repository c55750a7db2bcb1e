"""Lowerings of the gradient-norm ops: the numpy kernels' formulas (``backend/numpy/kernels/optimizer.py``) in
``jax.numpy``, the norm summed in float64. The update rules state their math in ``program/ops/optimizer.py`` and
are derived (``derived``).
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

__all__ = ["LOWERINGS"]


def _global_norm_f64(xs):
    """The norm of all of ``xs`` together, summed in float64 as the numpy kernel does."""
    return jnp.sqrt(sum(jnp.sum(jnp.square(x.astype(np.float64))) for x in xs))


def _global_norm(op, ctx):
    return lambda *xs: _global_norm_f64(xs).astype(xs[0].dtype)


def _clip_by_global_norm(op, ctx):
    max_norm = op.attr("max_norm")

    def run(*xs):
        scale = max_norm / jnp.maximum(_global_norm_f64(xs), max_norm)
        out = tuple((x * scale).astype(x.dtype) for x in xs)  # as numpy: by a float64 scale, then rounded
        return out[0] if len(out) == 1 else out

    return run


LOWERINGS = {
    "global_norm": _global_norm, "clip_by_global_norm": _clip_by_global_norm,
}
