"""Batch normalization in the torch engine on ATen's fused kernels (``numpy/kernels/normalization.py`` keeps
numpy's own the same way): the op's compute where they do not run (float16, an empty batch, one value per
channel), the batch statistics kept from the forward kernel for the gradient (``kept``)."""
from __future__ import annotations

import math

import torch

from gradgen.program.ops import OP_SCHEMAS
from gradgen.program.ops.network import AtenRows, aten_rows, largest, most, moved_statistics, one_or_more, rounded

from . import kept
from ..xp import XP
from .derived import derived_kernel
from .finite import fused, known_finite

__all__ = ["FASTER", "KERNELS"]

_aten = torch.ops.aten


def _normalized(x: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor, eps: float):
    """y over x's batch statistics, those statistics (x's per-channel mean and population variance) and ATen's own
    (saved mean, rstd). One call of ATen's ``native_batch_norm`` with fresh running buffers and momentum 1, which
    it fills with the mean and the unbiased variance, rescaled here."""
    mean, unbiased = torch.zeros(x.shape[1], dtype=x.dtype), torch.zeros(x.shape[1], dtype=x.dtype)
    y, saved_mean, rstd = _aten.native_batch_norm(x, scale, bias, mean, unbiased, True, 1.0, eps)
    kept.keep(x, ("batch_norm", eps), (saved_mean, rstd))
    count = x.numel() // x.shape[1]
    return y, mean, unbiased * ((count - 1) / count), saved_mean, rstd


def _magnitude(t: torch.Tensor) -> float:
    """A bound on max|t| for the guards: the square root of t's sum of squares (one BLAS pass, 0.18 ms over ResNet's
    [32, 64, 32, 32] float32 where ``largest``'s ``aminmax`` took 0.33); NaN with a NaN in t, inf with an infinity
    or where the squares' sum overflows (a float32 t past 1e19: the compute then runs, which is right too)."""
    flat = t.reshape(-1)
    return math.sqrt(float(torch.dot(flat, flat))) if flat.numel() else 0.0


def _running_rows(x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, eps: float) -> AtenRows:
    """``AtenRows`` of the channels under the running statistics (``is_test``), which bound no |x|: the span is
    max|x| + max|Mean| (one pass over X, ``_magnitude``)."""
    rows = aten_rows(mean, (var + rounded(eps, x)).rsqrt(), 1, rounded(eps, x))
    return rows._replace(span=one_or_more(_magnitude(x) + largest(mean)))


def _batch_rows(x: torch.Tensor, saved_mean: torch.Tensor, rstd: torch.Tensor, eps: float) -> AtenRows:
    """``AtenRows`` of the channels under the batch's own statistics (ATen's mean and rstd), fit whatever their
    spread: in training a channel far from 0 stays ATen's (``batch_norm`` says why)."""
    return aten_rows(saved_mean, rstd, x.numel() // x.shape[1], rounded(eps, x))._replace(fit=True)


def batch_norm(op):
    """On ATen's fused kernel (``native_batch_norm``), the running statistics moved as the op's compute moves
    them; float16, an empty batch and one value per channel take the compute (``FASTER`` says why the fused kernel
    stays), and so do the channels ATen's formula parts from the compute's on (the guards layer norm's ATen call
    keeps, ``program/ops/network.py``). ATen folds the normalisation into Y = X a + (Bias - mean a), a = Scale
    rstd, where the compute centres first, so its X a and mean a overflow where the compute's terms do not (a
    Scale of inf or 3.4e38 made NaN where the compute's Y is +-inf): 16 max|x| max(1, rstd) max(1, |Scale|) +
    |Bias| must stay under the dtype's largest value, max|x| bounded by the batch's statistics in training, read
    from X in test mode. And they lose about |mean| / sqrt(var) ulp on a channel far from 0: with the running
    statistics (test mode) such channels (``AtenRows.fit``) take the compute, which has no sum there (float32
    channels 1e4 deviations out parted from the reference by 8e-5, past the engines' 1e-5; the compute's 0); in
    training they stay ATen's, the compute over torch parting further by its own order of summation (float64,
    1e4 deviations: ATen's 1.7e-12 of the reference, the compute's 1e-11; float32 4.7e-4 and 3.9e-4, a
    reordered sum, ``numerics.md`` rule 4). Y is then finite, and known so to the next kernel."""
    momentum, eps, is_test = op.attr("momentum"), op.attr("epsilon"), op.attr("is_test")
    estimator = op.attr("running_variance")
    computed = derived_kernel(OP_SCHEMAS["batch_norm"], XP)(op)

    def run(x, scale, bias, mean, var):
        if not fused(x) or (not is_test and x.numel() == x.shape[1]):
            return computed(x, scale, bias, mean, var)
        if is_test:
            if not _running_rows(x, mean, var, eps).output_fits(x, scale, bias):
                return computed(x, scale, bias, mean, var)
            y = _aten.native_batch_norm(x, scale, bias, mean, var, False, 0.0, eps)[0]
            known_finite(y)
            return y, mean, var
        y, mu, v, saved_mean, rstd = _normalized(x, scale, bias, eps)
        if not _batch_rows(x, saved_mean, rstd, eps).output_fits(x, scale, bias):
            return computed(x, scale, bias, mean, var)
        known_finite(y)
        return (y, *moved_statistics(mean, var, mu, v, tuple(x.shape), momentum=momentum,
                                     running_variance=estimator))

    return run


def batch_norm_grad(op):
    """On ATen's fused kernel (``native_batch_norm_backward``, the batch statistics those batch_norm's kernel
    kept for this tensor (``kept``), else recomputed by ``native_batch_norm``); float16 and an empty batch take
    the op's compute, and so do magnitudes at which ATen's terms or the compute's could overflow where the
    other's do not: ATen's dX overflowed where the compute's did not (float64 X holding the largest float: inf
    against 1.07e308), and with the running statistics the compute's Scale@GRAD overflowed where ATen's did not
    (float32 X of -3.4e38). As layer norm's gradient (``AtenRows.gradient_bound``): 16 n max|dY| max(1, |Scale|)
    span**2 max(1, rstd)**3 under the dtype's largest value (n values a channel; span bounds |x|, ``AtenRows``;
    max|dY| bounded by ``_magnitude``; NaN and infinities fail it). dX is then finite, and known so to the
    convolution's gradient that reads it next."""
    eps, is_test = op.attr("epsilon"), op.attr("is_test")
    computed = derived_kernel(OP_SCHEMAS["batch_norm_grad"], XP)(op)

    def run(x, scale, *rest):
        if not fused(x):
            return computed(x, scale, *rest)
        dy = rest[-1]
        if is_test:
            mean, var = rest[0], rest[1]
            rows, statistics = _running_rows(x, mean, var, eps), (mean, var, None, None)
        else:
            stats = kept.kept(x, ("batch_norm", eps))
            _, mean, rstd = (None, *stats) if stats else _aten.native_batch_norm(x, None, None, None, None, True, 0.0,
                                                                                 eps)
            rows, statistics = _batch_rows(x, mean, rstd, eps), (None, None, mean, rstd)
        if not rows.gradient_bound(x.numel() // x.shape[1], _magnitude(dy), scale) <= most(x):
            return computed(x, scale, *rest)
        outs = _aten.native_batch_norm_backward(dy, x, scale, *statistics, not is_test, eps, [True, True, True])
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
