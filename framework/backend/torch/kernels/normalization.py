"""Batch normalization in the torch engine on ATen's fused kernels (``numpy/kernels/normalization.py`` keeps
numpy's own the same way): the op's compute where they do not run (float16, an empty batch, one value per
channel), the batch statistics kept from the forward kernel for the gradient (``kept``)."""
from __future__ import annotations

import math

import torch

from gradgen.program.ops import OP_SCHEMAS
from gradgen.program.ops.network import moved_statistics

from . import kept
from ..xp import XP
from .derived import derived_kernel
from .finite import fused, known_finite

__all__ = ["FASTER", "KERNELS"]

_aten = torch.ops.aten

def _normalized(x: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor, eps: float):
    """y over x's batch statistics, and those statistics: x's per-channel mean and population variance. One call
    of ATen's ``native_batch_norm`` with fresh running buffers and momentum 1, which it fills with the mean and
    the unbiased variance, rescaled here."""
    mean, unbiased = torch.zeros(x.shape[1], dtype=x.dtype), torch.zeros(x.shape[1], dtype=x.dtype)
    y, saved_mean, rstd = _aten.native_batch_norm(x, scale, bias, mean, unbiased, True, 1.0, eps)
    kept.keep(x, ("batch_norm", eps), (saved_mean, rstd))
    count = x.numel() // x.shape[1]
    return y, mean, unbiased * ((count - 1) / count)


def batch_norm(op):
    """Training on ATen's fused kernel (``native_batch_norm``), the running statistics moved as the op's compute
    moves them; float16, an empty batch and one value per channel take the compute (``FASTER`` says why the
    fused kernel stays)."""
    momentum, eps, is_test = op.attr("momentum"), op.attr("epsilon"), op.attr("is_test")
    estimator = op.attr("running_variance")
    computed = derived_kernel(OP_SCHEMAS["batch_norm"], XP)(op)

    def run(x, scale, bias, mean, var):
        if not fused(x) or (not is_test and x.numel() == x.shape[1]):
            return computed(x, scale, bias, mean, var)
        if is_test:
            return _aten.native_batch_norm(x, scale, bias, mean, var, False, 0.0, eps)[0], mean, var
        y, mu, v = _normalized(x, scale, bias, eps)
        return (y, *moved_statistics(mean, var, mu, v, tuple(x.shape), momentum=momentum,
                                     running_variance=estimator))

    return run


def batch_norm_grad(op):
    """On ATen's fused kernel (``native_batch_norm_backward``, the batch statistics those batch_norm's kernel kept
    for this tensor (``kept``), else recomputed by ``native_batch_norm``); float16 and an empty batch take the
    op's compute, and so does a result that is not finite: ATen's dX, formed otherwise, overflowed where the
    compute's did not (float64 X holding the largest float: inf against 1.07e308), and NaN and infinities in the
    inputs then take the reference's own places. The sum that decides proves dX finite for the convolution's
    gradient that reads it next (which would sum it otherwise)."""
    eps, is_test = op.attr("epsilon"), op.attr("is_test")
    computed = derived_kernel(OP_SCHEMAS["batch_norm_grad"], XP)(op)

    def run(x, scale, *rest):
        if not fused(x):
            return computed(x, scale, *rest)
        dy = rest[-1]
        if is_test:
            mean, var = rest[0], rest[1]
            outs = _aten.native_batch_norm_backward(dy, x, scale, mean, var, None, None, False, eps, [True, True, True])
        else:
            stats = kept.kept(x, ("batch_norm", eps))
            _, mean, rstd = (None, *stats) if stats else _aten.native_batch_norm(x, None, None, None, None, True, 0.0,
                                                                                 eps)
            outs = _aten.native_batch_norm_backward(dy, x, scale, None, None, mean, rstd, True, eps, [True, True, True])
        if not all(math.isfinite(float(torch.sum(g))) for g in outs):
            return computed(x, scale, *rest)
        known_finite(outs[0])
        return tuple(outs)

    return run


KERNELS = {"batch_norm": batch_norm, "batch_norm_grad": batch_norm_grad}

FASTER = {
    "batch_norm": "ATen's native_batch_norm took 1.5 ms on ResNet's [32, 64, 32, 32] float32 (two threads) in "
                  "training, the op's formulas 6.8",
    "batch_norm_grad": "ATen's native_batch_norm_backward took 2.4 ms on ResNet's [32, 64, 32, 32] float32 (two "
                       "threads), the op's formulas 5",
}
"""op type -> why its kernel here stays beside the op's compute (``backend/derive.with_derived``)."""
