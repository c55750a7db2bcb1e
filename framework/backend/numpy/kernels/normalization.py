"""Kernels of batch normalization and its fused gradient, kept beside the ops' compute (``program/ops/network.py``)
because they measure faster (``FASTER``); layer norm's kernels are derived (``derived``).

Each works on X viewed as ``[N, C, positions]``, in a few whole-array numpy operations that write into at most two arrays shaped
like X: the result and one temporary. Row dot products go through
``einsum``, which reads its operands without materializing their product.
The result is a new array every run; the temporary, which never leaves the
kernel, is a per-thread scratch array (``scratch``). float16 is computed in
float32 and rounded back.
"""
from __future__ import annotations

import math

import numpy as np

from gradgen.program.ops.network import moved_statistics

from .scratch import scratch

__all__ = ["FASTER", "KERNELS"]


def _work_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype the statistics are computed in: float16 accumulates in float32."""
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def _as(shape: tuple[int, ...], x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``x`` reshaped to ``shape`` in ``dtype`` (a view when it can be)."""
    return x.reshape(shape).astype(dtype, copy=False)


def _stats(x: np.ndarray, axes: tuple[int, ...], centred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and biased variance of ``x`` over ``axes`` (kept as size-1 dims); ``x`` centred written to ``centred``."""
    count = x.dtype.type(math.prod(x.shape[a] for a in axes))
    with np.errstate(invalid="ignore", divide="ignore"):  # nothing to average: NaN statistics
        mean = np.add.reduce(x, axis=axes, keepdims=True) / count
        np.subtract(x, mean, out=centred)
        sub = "abc"[:x.ndim]
        kept = "".join(c for i, c in enumerate(sub) if i not in axes)
        var = np.einsum(f"{sub},{sub}->{kept}", centred, centred).reshape(mean.shape) / count
    return mean, var


def _normalized_grad(dy: np.ndarray, xhat: np.ndarray, rstd: np.ndarray, gain, axes: tuple[int, ...],
                     dx: np.ndarray) -> None:
    """dX = rstd * (c - mean(c) - xhat * mean(c * xhat)), c = dy * gain, into ``dx`` (xhat is overwritten)."""
    count = dy.dtype.type(math.prod(dy.shape[a] for a in axes))
    if gain is None:
        np.copyto(dx, dy)
    else:
        np.multiply(dy, gain, out=dx)
    c = dx
    sub = "abc"[:dy.ndim]
    kept = "".join(ch for i, ch in enumerate(sub) if i not in axes)
    with np.errstate(invalid="ignore", divide="ignore"):
        along = np.einsum(f"{sub},{sub}->{kept}", c, xhat).reshape(rstd.shape) / count
        dx -= np.add.reduce(c, axis=axes, keepdims=True) / count
    xhat *= along
    dx -= xhat
    dx *= rstd


def _channels(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``x`` as ``[N, C, positions]`` in ``dtype``."""
    return _as((x.shape[0], x.shape[1], math.prod(x.shape[2:])), x, dtype)


def _per_channel(v: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return v.reshape(1, -1, 1).astype(dtype, copy=False)


_BATCH_AXES = (0, 2)


def batch_norm(op):
    momentum, eps, is_test = op.attr("momentum"), op.attr("epsilon"), op.attr("is_test")
    estimator = op.attr("running_variance")

    def run(x, scale, bias, mean, var):
        work = _work_dtype(x.dtype)
        x3 = _channels(x, work)
        y = np.empty(x3.shape, work)
        # An empty batch tells nothing about the statistics: it normalizes (nothing) with the running ones and
        # leaves them as they were; its own (NaN) mean and variance would poison them for good.
        running = is_test or x.size == 0
        if running:
            mu, v = _per_channel(mean, work), _per_channel(var, work)
            np.subtract(x3, mu, out=y)
        else:
            mu, v = _stats(x3, _BATCH_AXES, y)
        y *= _per_channel(scale, work) / np.sqrt(v + eps)
        y += _per_channel(bias, work)
        y_out = y.reshape(x.shape).astype(x.dtype, copy=False)
        if running:
            return y_out, mean, var
        new_mean, new_var = moved_statistics(mean, var, mu.reshape(-1), v.reshape(-1), x.shape, momentum=momentum,
                                             running_variance=estimator)
        return y_out, new_mean.astype(mean.dtype, copy=False), new_var.astype(var.dtype, copy=False)

    return run


def batch_norm_grad(op):
    eps, is_test = op.attr("epsilon"), op.attr("is_test")

    def run(x, scale, *rest):
        dy = rest[-1]
        work = _work_dtype(x.dtype)
        x3, dy3 = _channels(x, work), _channels(dy, work)
        xhat, dx = scratch("batch_norm_grad xhat", x3.shape, work), np.empty(x3.shape, work)
        if is_test:
            var = _per_channel(rest[1], work)
            np.subtract(x3, _per_channel(rest[0], work), out=xhat)
        else:
            _, var = _stats(x3, _BATCH_AXES, xhat)
        rstd = 1.0 / np.sqrt(var + eps)
        xhat *= rstd
        if x3.shape[0] * x3.shape[2]:
            dbias, dscale = np.add.reduce(dy3, axis=_BATCH_AXES), np.einsum("ncs,ncs->c", dy3, xhat)
        else:  # an empty batch adds nothing to a channel's sums: zeros by definition, not by a library's edge case
            dbias, dscale = np.zeros(x3.shape[1], work), np.zeros(x3.shape[1], work)
        gain = _per_channel(scale, work) * rstd
        if is_test:
            np.multiply(dy3, gain, out=dx)
        else:  # Scale is constant over a channel: mean(c) and mean(c * xhat) are Scale times dBias and dScale / count
            count = work.type(x3.shape[0] * x3.shape[2])
            with np.errstate(invalid="ignore", divide="ignore"):
                np.multiply(xhat, (dscale / count).reshape(1, -1, 1), out=dx)
                dx += (dbias / count).reshape(1, -1, 1)
            np.subtract(dy3, dx, out=dx)
            dx *= gain
        cast = lambda v: v.astype(x.dtype, copy=False)  # noqa: E731
        return cast(dx.reshape(x.shape)), cast(dscale), cast(dbias)

    return run


KERNELS = {"batch_norm": batch_norm, "batch_norm_grad": batch_norm_grad}

FASTER = {
    "batch_norm": "writes the result in place and sums the squares by einsum: 1.63 ms on ResNet's [32, 64, 32, 32] "
                  "float32 in training, the op's compute 2.77 (float64 3.94 against 9.44)",
    "batch_norm_grad": "one scratch array and einsum row products: 3.73 ms on ResNet's [32, 64, 32, 32] float32, "
                       "the op's compute 12.36 (float64 9.02 against 20.79)",
}
"""op type -> why its kernel here stays beside the op's compute (``backend/derive.with_derived``); it sums in
another order than the compute, so the two agree to rounding (tests/framework/test_faster_kernels.py)."""
