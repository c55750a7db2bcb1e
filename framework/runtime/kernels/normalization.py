"""Kernels of batch and layer normalization and their fused gradients.

Each works on X viewed as rows of a matrix (layer norm: one row per leading
index, the normalized dims flattened; batch norm: ``[N, C, positions]``), so a
pass over the data is a few whole-array numpy operations with no temporaries
shaped like X beyond the one it returns and one more. Row dot products go
through ``einsum``, which reads its operands without materializing their
product. float16 is computed in float32 and rounded back.
"""
from __future__ import annotations

import math

import numpy as np

from gradgen.program.shapes import normalize_axis

__all__ = ["KERNELS"]


def _work_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype the statistics are computed in: float16 accumulates in float32."""
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def _given(op, slot: str) -> bool:
    return bool(op.input(slot))


def _split(op) -> int:
    """The first normalized dim of layer_norm's X."""
    return normalize_axis(op.attr("begin_norm_axis"), len(op.block.var(op.input("X")[0]).shape))


def _rows(x: np.ndarray, begin: int, dtype: np.dtype) -> np.ndarray:
    """``x`` as a ``[leading, normalized]`` matrix in ``dtype``."""
    return x.reshape(math.prod(x.shape[:begin]), math.prod(x.shape[begin:])).astype(dtype, copy=False)


def _row_stats(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, biased variance (both ``[rows, 1]``) and the centred rows of a ``[rows, n]`` matrix."""
    n = rows.dtype.type(rows.shape[1])
    with np.errstate(invalid="ignore", divide="ignore"):  # no normalized elements: NaN statistics
        mean = np.add.reduce(rows, axis=1, keepdims=True) / n
        centred = np.subtract(rows, mean)
        var = np.einsum("ij,ij->i", centred, centred)[:, None] / n
    return mean, var, centred


def layer_norm(op):
    begin, eps = _split(op), op.attr("epsilon")
    has_scale, has_bias = _given(op, "Scale"), _given(op, "Bias")

    def run(x, *affine):
        rows = _rows(x, begin, _work_dtype(x.dtype))
        mean, var, y = _row_stats(rows)
        y *= 1.0 / np.sqrt(var + eps)
        n = rows.shape[1]
        if has_scale:
            y *= affine[0].reshape(1, n)
        if has_bias:
            y += affine[-1].reshape(1, n)
        lead = x.shape[:begin]
        return (y.reshape(x.shape).astype(x.dtype, copy=False), mean.reshape(lead).astype(x.dtype, copy=False),
                var.reshape(lead).astype(x.dtype, copy=False))

    return run


def layer_norm_grad(op):
    begin, eps, has_scale = _split(op), op.attr("epsilon"), _given(op, "Scale")
    want_scale, want_bias = bool(op.output("Scale@GRAD")), bool(op.output("Bias@GRAD"))

    def run(x, *rest):
        scale, dy = rest if has_scale else (None, rest[0])
        work = _work_dtype(x.dtype)
        rows, dys = _rows(x, begin, work), _rows(dy, begin, work)
        n = rows.shape[1]
        _, var, xhat = _row_stats(rows)
        rstd = 1.0 / np.sqrt(var + eps)
        xhat *= rstd
        outs = []
        c = dys if scale is None else dys * scale.reshape(1, n).astype(work, copy=False)
        with np.errstate(invalid="ignore", divide="ignore"):
            dx = np.subtract(c, np.add.reduce(c, axis=1, keepdims=True) / work.type(n))
            dx -= xhat * (np.einsum("ij,ij->i", c, xhat)[:, None] / work.type(n))
        dx *= rstd
        outs.append(dx.reshape(x.shape).astype(x.dtype, copy=False))
        affine = x.shape[begin:]
        if want_scale:
            outs.append(np.einsum("ij,ij->j", dys, xhat).reshape(affine).astype(x.dtype, copy=False))
        if want_bias:
            outs.append(np.add.reduce(dys, axis=0).reshape(affine).astype(x.dtype, copy=False))
        return outs[0] if len(outs) == 1 else tuple(outs)

    return run


def _channels(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``x`` as ``[N, C, positions]`` in ``dtype``."""
    return x.reshape(x.shape[0], x.shape[1], math.prod(x.shape[2:])).astype(dtype, copy=False)


def _batch_stats(x3: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-channel mean and (biased) variance of ``[N, C, positions]`` as ``[1, C, 1]``, and x3 centred."""
    count = x3.shape[0] * x3.shape[2]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.add.reduce(x3, axis=(0, 2), keepdims=True) / x3.dtype.type(count)
        centred = x3 - mean
        var = np.einsum("ncs,ncs->c", centred, centred)[None, :, None] / x3.dtype.type(count)
    return mean, var, centred


def batch_norm(op):
    momentum, eps, is_test = op.attr("momentum"), op.attr("epsilon"), op.attr("is_test")

    def run(x, scale, bias, mean, var):
        work = _work_dtype(x.dtype)
        x3 = _channels(x, work)
        if is_test:
            mu, v = (s.reshape(1, -1, 1).astype(work, copy=False) for s in (mean, var))
            y = np.subtract(x3, mu)
        else:
            mu, v, y = _batch_stats(x3)
        gain = scale.reshape(1, -1, 1) / np.sqrt(v + eps)
        y *= gain
        y += bias.reshape(1, -1, 1)
        y = y.reshape(x.shape).astype(x.dtype, copy=False)
        if is_test:
            return y, mean, var
        new_mean = (momentum * mean + (1.0 - momentum) * mu.reshape(-1)).astype(mean.dtype, copy=False)
        new_var = (momentum * var + (1.0 - momentum) * v.reshape(-1)).astype(var.dtype, copy=False)
        return y, new_mean, new_var

    return run


def batch_norm_grad(op):
    eps, is_test = op.attr("epsilon"), op.attr("is_test")

    def run(x, scale, *rest):
        dy = rest[-1]
        work = _work_dtype(x.dtype)
        x3, dy3 = _channels(x, work), _channels(dy, work)
        if is_test:
            mean, var = (v.reshape(1, -1, 1).astype(work, copy=False) for v in rest[:2])
            xhat = np.subtract(x3, mean)
        else:
            _, var, xhat = _batch_stats(x3)
        rstd = 1.0 / np.sqrt(var + eps)
        xhat *= rstd
        dbias = np.add.reduce(dy3, axis=(0, 2))
        dscale = np.einsum("ncs,ncs->c", dy3, xhat)
        gain = scale.reshape(1, -1, 1).astype(work, copy=False) * rstd
        if is_test:
            dx = dy3 * gain
        else:
            count = work.type(x3.shape[0] * x3.shape[2])
            with np.errstate(invalid="ignore", divide="ignore"):
                dx = xhat * (dscale[None, :, None] / count)
                dx += dbias[None, :, None] / count
            np.subtract(dy3, dx, out=dx)
            dx *= gain
        cast = lambda v: v.astype(x.dtype, copy=False)  # noqa: E731
        return cast(dx.reshape(x.shape)), cast(dscale), cast(dbias)

    return run


KERNELS = {"batch_norm": batch_norm, "batch_norm_grad": batch_norm_grad, "layer_norm": layer_norm,
           "layer_norm_grad": layer_norm_grad}
