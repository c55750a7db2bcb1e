"""The softmax cross-entropy in torch, the numpy kernel's formula (``numpy/kernels/nn.py``: the loss from
log_softmax's compute, hard labels read as torch reads them); batch normalization and relu's gradient on ATen's
fused kernels, the op's compute where they do not run. (The rest of the softmax family is derived.)"""
from __future__ import annotations

import torch

from gradgen.program.ops import OP_SCHEMAS
from gradgen.program.ops.network import moved_statistics
from gradgen.program.ops.nn import check_label_shape, log_softmax

from ...shared.attrs import op_axis
from ..xp import XP
from . import kept
from .derived import derived_kernel
from .finite import all_finite

__all__ = ["FASTER", "KERNELS"]

_aten = torch.ops.aten


def _hard_labels(op, label: torch.Tensor, x_shape, axis: int):
    """Hard labels as indexes of x's rank (ignored ones 0) and the mask of kept ones; a ValueError naming the first
    label outside [0, classes) that is not ``ignore_index``."""
    check_label_shape(label, tuple(x_shape), axis)
    ignored, size = op.attr("ignore_index"), x_shape[axis]
    bad = ((label < 0) | (label >= size)) & (label != ignored)
    if bool(bad.any()):
        where = [int(i) for i in torch.nonzero(bad)[0]]
        raise ValueError(f"label {int(label[tuple(where)])} at index {where} is outside [0, {size}) and is not "
                         f"ignore_index {ignored} ({int(bad.sum())} such value(s))")
    index = label if label.ndim == len(x_shape) else torch.unsqueeze(label, axis)
    index = index.to(torch.int64)
    kept = index != ignored
    return torch.where(kept, index, 0), kept


def softmax_with_cross_entropy(op):
    axis, soft = op_axis(op, "Logits"), op.attr("soft_label")

    def run(logits, label):
        log_p = log_softmax(XP, logits, axis=axis)
        if soft:
            check_label_shape(label, tuple(logits.shape), None)
            loss = -torch.sum(label * log_p, dim=axis, keepdim=True)
        else:
            index, kept = _hard_labels(op, label, logits.shape, axis)
            loss = torch.where(kept, -torch.take_along_dim(log_p, index, dim=axis), 0.0)
        return torch.exp(log_p), loss.to(logits.dtype)

    return run


_FUSED = (torch.float32, torch.float64)
"""The dtypes ATen's fused batch norm kernels run here (float16 takes the op's compute, in float32)."""


def _fused(x: torch.Tensor) -> bool:
    return x.dtype in _FUSED and x.numel() > 0


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
    computed = derived_kernel(OP_SCHEMAS["batch_norm"])(op)

    def run(x, scale, bias, mean, var):
        if not _fused(x) or (not is_test and x.numel() == x.shape[1]):
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
    op's compute."""
    eps, is_test = op.attr("epsilon"), op.attr("is_test")
    computed = derived_kernel(OP_SCHEMAS["batch_norm_grad"])(op)

    def run(x, scale, *rest):
        if not _fused(x):
            return computed(x, scale, *rest)
        dy = rest[-1]
        if is_test:
            mean, var = rest[0], rest[1]
            return tuple(_aten.native_batch_norm_backward(dy, x, scale, mean, var, None, None, False, eps,
                                                          [True, True, True]))
        stats = kept.kept(x, ("batch_norm", eps))
        _, mean, rstd = (None, *stats) if stats else _aten.native_batch_norm(x, None, None, None, None, True, 0.0, eps)
        return tuple(_aten.native_batch_norm_backward(dy, x, scale, None, None, mean, rstd, True, eps,
                                                      [True, True, True]))

    return run


def relu_grad(op):
    """``where(Out > 0, dOut, dOut * 0)`` (the op's compute) as ATen's ``threshold_backward`` where Out and dOut are
    finite (the same numbers, but that a negative dOut at an inactive unit gives +0 where the compute gives -0),
    else as ``dOut * (Out > 0)``: NaN from an infinite or NaN dOut at an inactive unit, dOut * 0 at a NaN Out."""
    def run(y, dout):
        if all_finite(y, dout):
            return _aten.threshold_backward(dout, y, 0)
        return dout * (y > 0)

    return run


KERNELS = {"softmax_with_cross_entropy": softmax_with_cross_entropy,
           "batch_norm": batch_norm, "batch_norm_grad": batch_norm_grad,
           "relu_grad": relu_grad}

FASTER = {
    "batch_norm": "ATen's native_batch_norm took 1.5 ms on ResNet's [32, 64, 32, 32] float32 (two threads) in "
                  "training, the op's formulas 6.8",
    "batch_norm_grad": "ATen's native_batch_norm_backward took 2.4 ms on ResNet's [32, 64, 32, 32] float32 (two "
                       "threads), the op's formulas 5",
    "relu_grad": "torch.where over a data-dependent mask took 4.0 ms on ResNet's [32, 64, 32, 32] float32 (two "
                 "threads), the product with the mask 1.07 ms, ATen's threshold_backward 0.24 and the two finiteness "
                 "checks it needs 0.22",
}
"""op type -> why its kernel here stays beside the op's compute (``backend/derive.with_derived``)."""
