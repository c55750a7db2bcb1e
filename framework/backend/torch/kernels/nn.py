"""The softmax cross-entropy with hard labels in the torch engine on ATen's ``_log_softmax`` and a gather (``FASTER``
says why it stays beside the op's compute); the compute where they would part from it. (Softmax itself is its
op's one ATen call, ``program/ops/nn.softmax_aten``, derived.)"""
from __future__ import annotations

import torch

from gradgen.program.ops import OP_SCHEMAS
from gradgen.program.ops.nn import check_label_shape
from gradgen.program.shapes import normalize_axis

from ..xp import XP
from .derived import derived_kernel
from .finite import all_finite, fused

__all__ = ["FASTER", "KERNELS"]

_aten = torch.ops.aten


_INDEX_DTYPES = (torch.int64, torch.int32)
"""The label dtypes a gather takes as indices (an int32 label is widened)."""


def softmax_with_cross_entropy(op):
    """(Softmax, Loss) for hard labels: the loss picked from ATen's ``_log_softmax`` by a gather, the softmax its
    exp, the compute's own formulas. The compute for soft labels, float16, empty or non-finite logits, and labels
    it treats otherwise than a gather would: outside [0, classes) (it refuses them or zeroes an ignored row), or
    where ``ignore_index`` is a class (a row of it gives 0). A label of a shape the op does not take is refused as
    the compute refuses it (``check_label_shape``)."""
    computed = derived_kernel(OP_SCHEMAS["softmax_with_cross_entropy"], XP)(op)
    if op.attr("soft_label"):
        return computed
    axis_attr, ignored = op.attr("axis"), op.attr("ignore_index")

    def run(logits, label):
        if fused(logits) and logits.ndim and label.dtype in _INDEX_DTYPES:
            axis = normalize_axis(axis_attr, logits.ndim)
            check_label_shape(label, tuple(logits.shape), axis)  # the compute's own refusal of another shape
            classes = logits.shape[axis]
            index = label if label.ndim == logits.ndim else label.unsqueeze(axis)
            if not 0 <= ignored < classes and all_finite(logits):
                low, high = torch.aminmax(index)
                if int(low) >= 0 and int(high) < classes:
                    log_p = _aten._log_softmax(logits, axis, False)
                    return torch.exp(log_p), torch.gather(log_p, axis, index.long()).neg_()
        return computed(logits, label)

    return run


KERNELS = {"softmax_with_cross_entropy": softmax_with_cross_entropy}

FASTER = {
    "softmax_with_cross_entropy": "hard labels: ATen's _log_softmax and a gather, with the finiteness and label "
                                  "checks, took 25 us on LeNet's [64, 10] float32 logits (two threads), the op's "
                                  "formulas 95-130 (about 30 ATen calls; 400 inside the LeNet step)",
}
"""op type -> why its kernel here stays beside the op's compute (``backend/derive.with_derived``)."""
