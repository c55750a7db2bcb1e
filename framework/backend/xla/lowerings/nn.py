"""Lowerings of the cross-entropy losses: the numpy kernels' formulas (``backend/numpy/kernels/nn.py``) in
``jax.numpy``, in the same order of operations and the same dtypes; the softmax cross-entropy is the kernels' own,
written once over ``xp`` (``shared/nn``) on log_softmax's compute. (softmax and log_softmax state their math in
``program/ops/nn.py``: derived.)

Labels must have the shape the logits imply: shapes are static here, so a wrong one is refused while tracing,
with the numpy kernel's message (``shared/nn``). A hard label outside [0, classes) that is not ``ignore_index`` is
a run-time check (``ctx.check``): XLA would clamp it to a class silently.
"""
from __future__ import annotations

from functools import partial

import jax.numpy as jnp

from gradgen.program.ops.nn import check_label_shape

from ...shared.attrs import op_axis, out_dtype
from ...shared.nn import softmax_cross_entropy
from ..xp import as_computed

__all__ = ["LOWERINGS"]


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
            return (-jnp.sum(label * jnp.log(as_computed(x)), axis=-1, keepdims=True)).astype(dtype)

        return soft

    def hard(x, label):
        index, kept = _hard_labels(op, ctx, label, x.shape, x.ndim - 1)
        picked = jnp.take_along_axis(x, index, axis=-1)
        return jnp.where(kept, -jnp.log(jnp.where(kept, picked, 1)), 0).astype(dtype)

    return hard


def _softmax_with_cross_entropy(op, ctx):
    axis, soft = op_axis(op, "Logits"), op.attr("soft_label")
    dtype = out_dtype(op, "Loss")

    def run(logits, label):
        p, loss = softmax_cross_entropy(logits, label, axis, soft, partial(_hard_labels, op, ctx), jnp)
        return p, loss.astype(dtype)

    return run


LOWERINGS = {
    "cross_entropy": _cross_entropy,
    "softmax_with_cross_entropy": _softmax_with_cross_entropy,
}
