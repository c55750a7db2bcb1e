"""The softmax cross-entropy in torch, the numpy kernel's formula (``numpy/kernels/nn.py``: the loss from
log_softmax's compute, hard labels read as torch reads them). (The rest of the softmax family is derived.)"""
from __future__ import annotations

import torch

from gradgen.program.ops.nn import check_label_shape, log_softmax

from ...shared.attrs import op_axis
from ..xp import XP

__all__ = ["KERNELS"]


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


KERNELS = {"softmax_with_cross_entropy": softmax_with_cross_entropy}
