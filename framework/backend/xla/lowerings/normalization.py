"""Lowerings of batch normalization and its gradient: the numpy kernels' formulas
(``backend/numpy/kernels/normalization.py``) in ``jax.numpy``, X viewed as [N, C, positions], statistics in the
same working dtype and order of operations. (Layer norm states its math once and is derived: ``derived``.)"""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from gradgen.program.ops.network import running_variance_factor

__all__ = ["LOWERINGS"]


def _work_dtype(dtype) -> np.dtype:
    """The dtype statistics are computed in: float16 accumulates in float32 (as the numpy kernels)."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def _stats(x, axes: tuple[int, ...]):
    """Mean and biased variance of ``x`` over ``axes`` (kept as size-1 dims), and ``x`` centred."""
    count = math.prod(x.shape[a] for a in axes)
    mean = jnp.sum(x, axis=axes, keepdims=True) / x.dtype.type(count)
    centred = x - mean
    return mean, jnp.sum(centred * centred, axis=axes, keepdims=True) / x.dtype.type(count), centred


_BATCH_AXES = (0, 2)
"""batch_norm's statistics axes of X viewed as [N, C, positions]."""


def _channels(x, dtype):
    return x.reshape(x.shape[0], x.shape[1], math.prod(x.shape[2:])).astype(dtype)


def _per_channel(v, dtype):
    return v.reshape(1, -1, 1).astype(dtype)


def _batch_norm(op, ctx):
    momentum, eps, is_test = op.attr("momentum"), op.attr("epsilon"), op.attr("is_test")
    estimator = op.attr("running_variance")

    def run(x, scale, bias, mean, var):
        work = _work_dtype(x.dtype)
        x3 = _channels(x, work)
        # An empty batch normalizes (nothing) with the running statistics and leaves them as they were.
        running = is_test or x.size == 0
        if running:
            v, centred = _per_channel(var, work), x3 - _per_channel(mean, work)
        else:
            mu, v, centred = _stats(x3, _BATCH_AXES)
        y = centred * (_per_channel(scale, work) / jnp.sqrt(v + eps)) + _per_channel(bias, work)
        y = y.reshape(x.shape).astype(x.dtype)
        if running:
            return y, mean, var
        bessel = running_variance_factor(estimator, x3.shape[0] * x3.shape[2], x.shape)  # shapes are static here
        new_mean = (momentum * mean + (1.0 - momentum) * mu.reshape(-1)).astype(mean.dtype)
        new_var = (momentum * var + (1.0 - momentum) * bessel * v.reshape(-1)).astype(var.dtype)
        return y, new_mean, new_var

    return run


def _batch_norm_grad(op, ctx):
    eps, is_test = op.attr("epsilon"), op.attr("is_test")

    def run(x, scale, *rest):
        dy = rest[-1]
        work = _work_dtype(x.dtype)
        x3, dy3 = _channels(x, work), _channels(dy, work)
        if is_test:
            var, centred = _per_channel(rest[1], work), x3 - _per_channel(rest[0], work)
        else:
            _, var, centred = _stats(x3, _BATCH_AXES)
        rstd = 1.0 / jnp.sqrt(var + eps)
        xhat = centred * rstd
        dbias = jnp.sum(dy3, axis=_BATCH_AXES)
        dscale = jnp.sum(dy3 * xhat, axis=_BATCH_AXES)
        gain = _per_channel(scale, work) * rstd
        if is_test:
            dx = dy3 * gain
        else:  # Scale is constant over a channel: mean(c) and mean(c * xhat) are Scale times dBias and dScale / count
            count = work.type(x3.shape[0] * x3.shape[2])
            dx = (dy3 - (xhat * (dscale / count).reshape(1, -1, 1) + (dbias / count).reshape(1, -1, 1))) * gain
        return dx.reshape(x.shape).astype(x.dtype), dscale.astype(x.dtype), dbias.astype(x.dtype)

    return run


LOWERINGS = {"batch_norm": _batch_norm, "batch_norm_grad": _batch_norm_grad}
