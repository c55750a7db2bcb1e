"""Lowerings of softmax, the cross-entropy losses and batch normalization with their gradients (layer norm's
is derived from its schema's compute: ``lower_derived``): the
numpy kernels' formulas (``backend/numpy/kernels/nn.py``, ``normalization.py``, ``grad_ops.softmax_grad``) in
``jax.numpy``, in the same order of operations and the same dtypes.

Labels must have the shape the logits imply: shapes are static here, so a wrong one is refused while tracing,
with the numpy kernel's message. A hard label outside [0, classes) that is not ``ignore_index`` is a run-time
check (``ctx.check``): XLA would clamp it to a class silently.
"""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from gradgen.program.ops.network import running_variance_factor

from ..numpy.kernels.nn import _axis, check_label_shape  # the attrs read as the numpy kernels read them
from .lower_math import out_dtype

__all__ = ["LOWERINGS"]


def _log_softmax_along(x, axis: int):
    shifted = x - jnp.max(x, axis=axis, keepdims=True)
    return shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=axis, keepdims=True))


def _softmax(op, ctx):
    axis = _axis(op, "X")

    def run(x):
        e = jnp.exp(x - jnp.max(x, axis=axis, keepdims=True))
        return e / jnp.sum(e, axis=axis, keepdims=True)

    return run


def _log_softmax(op, ctx):
    axis = _axis(op, "X")
    return lambda x: _log_softmax_along(x, axis)


def _softmax_grad(op, ctx):
    """y * (dout - sum(dout * y, axis))."""
    rank = len(op.block.var(op.input("Out")[0]).shape)
    axis = op.attr("axis") % rank if rank else 0

    def run(y, dout):
        if rank == 0:
            return jnp.zeros_like(dout)
        return (dout - jnp.sum(dout * y, axis=axis, keepdims=True)) * y

    return run


def _hard_labels(op, ctx, label, x_shape: tuple, axis: int):
    """Hard labels as indices along ``axis`` with x's rank (ignored ones replaced by 0), and the mask of kept
    ones; a label out of range fails the run, as the numpy kernel raises."""
    check_label_shape(label, x_shape, axis)
    ignored, classes = op.attr("ignore_index"), x_shape[axis]
    ok = ((label >= 0) & (label < classes)) | (label == ignored)
    ctx.check(jnp.all(ok), f"a label is outside [0, {classes}) and is not ignore_index {ignored}")
    index = label.astype(jnp.int64)
    if index.ndim < len(x_shape):
        index = jnp.expand_dims(index, axis)
    kept = index != ignored
    return jnp.where(kept, index, 0), kept


def _cross_entropy(op, ctx):
    """X holds probabilities along the last axis: Out = -log(X[label]), or -sum(label * log X)."""
    dtype = out_dtype(op)
    if op.attr("soft_label"):
        def soft(x, label):
            check_label_shape(label, x.shape, None, "X")
            return (-jnp.sum(label * jnp.log(x), axis=-1, keepdims=True)).astype(dtype)

        return soft

    def hard(x, label):
        index, kept = _hard_labels(op, ctx, label, x.shape, x.ndim - 1)
        picked = jnp.take_along_axis(x, index, axis=-1)
        return jnp.where(kept, -jnp.log(jnp.where(kept, picked, 1)), 0).astype(dtype)

    return hard


def _softmax_with_cross_entropy(op, ctx):
    axis, soft = _axis(op, "Logits"), op.attr("soft_label")
    dtype = out_dtype(op, "Loss")

    def run(logits, label):
        log_p = _log_softmax_along(logits, axis)
        if soft:
            check_label_shape(label, logits.shape, None)
            loss = -jnp.sum(label * log_p, axis=axis, keepdims=True)
        else:
            index, kept = _hard_labels(op, ctx, label, logits.shape, axis)
            loss = jnp.where(kept, -jnp.take_along_axis(log_p, index, axis=axis), 0)
        return jnp.exp(log_p), loss.astype(dtype)

    return run


def _sigmoid_cross_entropy_with_logits(op, ctx):
    """max(x, 0) - x * z + log(1 + exp(-|x|)): the exp never overflows."""
    dtype = out_dtype(op)

    def run(x, label):
        check_label_shape(label, x.shape, None, "X")
        return (jnp.maximum(x, 0) - x * label + jnp.log1p(jnp.exp(-jnp.abs(x)))).astype(dtype)

    return run


# -- normalization ---------------------------------------------------------------------------------------------

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


def _normalized_grad(c, xhat, rstd, axes: tuple[int, ...]):
    """dX = rstd * (c - mean(c) - xhat * mean(c * xhat)), c being dY times the gain."""
    count = c.dtype.type(math.prod(c.shape[a] for a in axes))
    along = jnp.sum(c * xhat, axis=axes, keepdims=True) / count
    return (c - jnp.sum(c, axis=axes, keepdims=True) / count - xhat * along) * rstd


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


LOWERINGS = {
    "softmax": _softmax, "log_softmax": _log_softmax, "softmax_grad": _softmax_grad,
    "cross_entropy": _cross_entropy, "softmax_with_cross_entropy": _softmax_with_cross_entropy,
    "sigmoid_cross_entropy_with_logits": _sigmoid_cross_entropy_with_logits,
    "batch_norm": _batch_norm, "batch_norm_grad": _batch_norm_grad,
}
