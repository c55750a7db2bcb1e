"""Cross-entropy kernels, written to stay finite for any finite logits: cross-entropy from logits goes through
log-sum-exp (log_softmax's compute, ``program/ops/nn.py``), never through log(softmax). softmax and log_softmax
state their math there and are derived.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from gradgen.program.ops.nn import check_label_shape

from ...shared.attrs import op_axis
from ...shared.nn import softmax_cross_entropy


def _hard_label_index(label, x_ndim: int, axis: int):
    """Hard labels as an int array with x's rank and size 1 on ``axis`` (they may come without that axis)."""
    label = np.asarray(label)
    if label.ndim < x_ndim:
        label = np.expand_dims(label, axis)
    return label.astype(np.int64, copy=False)


def first_out_of_range(ids, size: int, what: str, ignored: int | None = None):
    """A ValueError naming the first of ``ids`` outside [0, size) (other than ``ignored``), or None."""
    bad = (ids < 0) | (ids >= size)
    if ignored is not None:
        bad &= ids != ignored
    if not bad.any():
        return None
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    also = f" and is not ignore_index {ignored}" if ignored is not None else ""
    return ValueError(f"{what} {int(ids[where])} at index {list(where)} is outside [0, {size}){also} "
                      f"({int(bad.sum())} such value(s))")


def _checked_labels(op, label, x_shape, axis: int):
    """Hard labels as indices along ``axis`` (ignored ones replaced by 0) and the mask of kept ones.

    A label outside [0, classes) that is not ``ignore_index`` raises: numpy would read -1 as the last class.
    """
    check_label_shape(label, x_shape, axis)
    ignored = op.attr("ignore_index")
    error = first_out_of_range(np.asarray(label), x_shape[axis], "label", ignored)  # at its index as given
    if error is not None:
        raise error
    index = _hard_label_index(label, len(x_shape), axis)
    kept = index != ignored
    return np.where(kept, index, 0), kept


def cross_entropy(op):
    """X holds probabilities along the last axis; Out = -log(X[label]) (or -sum(label * log X))."""
    if op.attr("soft_label"):
        def soft(x, label):
            check_label_shape(label, x.shape, None, "X")
            return -np.sum(label * np.log(x), axis=-1, keepdims=True)

        return soft

    def run(x, label):
        index, kept = _checked_labels(op, label, x.shape, x.ndim - 1)
        picked = np.take_along_axis(x, index, axis=-1)
        return np.where(kept, -np.log(np.where(kept, picked, 1)), 0).astype(x.dtype, copy=False)

    return run


def softmax_with_cross_entropy(op):
    axis, soft = op_axis(op, "Logits"), op.attr("soft_label")

    def run(logits, label):
        p, loss = softmax_cross_entropy(logits, label, axis, soft, partial(_checked_labels, op))
        return p, loss.astype(logits.dtype, copy=False)

    return run


KERNELS = {
    "cross_entropy": cross_entropy,
    "softmax_with_cross_entropy": softmax_with_cross_entropy,
}
