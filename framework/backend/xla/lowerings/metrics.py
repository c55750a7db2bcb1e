"""Lowerings of the metric ops (``backend/numpy/kernels/metrics.py``), computing what those kernels compute: counts
in int64, ratios in float64 rounded once to the scores' dtype.

A label outside ``[0, C)`` and a NaN prediction, which the numpy kernels refuse, are run-time checks
(``ctx.check``); a wrong label count or a k above the class count is refused while tracing (shapes are static).
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ...shared.metrics import area_under_counts, label_ranks

__all__ = ["LOWERINGS"]


def _dtype(op, slot: str = "X"):
    return np.dtype(op.block.var(op.input(slot)[0]).dtype)


def _class_ids(ctx, label, rows: int, classes: int, op: str):
    """``label`` as ``rows`` int64 class ids, each checked to be a class."""
    ids = jnp.reshape(label, -1).astype(np.int64)
    if ids.size != rows:
        raise ValueError(f"{op}: Label has {ids.size} ids for {rows} rows of scores")
    ctx.check(jnp.all((ids >= 0) & (ids < classes)), f"{op}: Label holds a class id outside [0, {classes})")
    return jnp.clip(ids, 0, max(classes - 1, 0))


def _ratio(num, den, dtype):
    return (num.astype(np.float64) / jnp.asarray(den, np.float64)).astype(dtype)


def _accuracy(op, ctx):
    k, dtype = op.attr("k"), _dtype(op)

    def run(x, label):
        rows, classes = x.shape
        if k > classes:
            raise ValueError(f"accuracy: k={k} is more than the {classes} classes")
        ids = _class_ids(ctx, label, rows, classes, "accuracy")
        correct = jnp.sum(label_ranks(x, ids, jnp) < k, dtype=np.int64)
        return _ratio(correct, rows, dtype), correct, jnp.asarray(rows, np.int64)

    return run


def _counts(values, length: int):
    """How many of ``values`` are each of ``0 .. length - 1`` (int64)."""
    return jnp.sum(values[:, None] == jnp.arange(length), axis=0, dtype=np.int64)


def _precision_recall(op, ctx):
    macro, pos_label, dtype = op.attr("average") == "macro", op.attr("pos_label"), _dtype(op)

    def score(hits, totals):
        per_class = hits.astype(np.float64) / jnp.maximum(totals, 1).astype(np.float64)
        return (jnp.mean(per_class) if macro else per_class[pos_label]).astype(dtype)

    def run(x, label):
        rows, classes = x.shape
        ids = _class_ids(ctx, label, rows, classes, "precision_recall")
        predicted = jnp.argmax(x, axis=1) if rows else jnp.zeros(0, np.int64)  # the first class on ties, NaN first
        hits = _counts(jnp.where(predicted == ids, ids, classes), classes)  # a miss counts in no class
        return score(hits, _counts(predicted, classes)), score(hits, _counts(ids, classes))

    return run


def _auc(op, ctx):
    thresholds = op.attr("num_thresholds")

    def run(predict, label, stat_pos, stat_neg):
        p = (predict if predict.ndim == 1 else predict[:, -1]).astype(np.float64)
        if label.size != p.size:
            raise ValueError(f"auc: Label has {label.size} ids for {p.size} rows of Predict")
        ctx.check(~jnp.any(jnp.isnan(p)), "auc: Predict holds NaN, which falls in no bucket")
        bucket = jnp.floor(jnp.clip(p * thresholds, 0, thresholds)).astype(np.int64)
        positive = (jnp.reshape(label, -1) != 0).astype(np.float64)
        batch_pos = jnp.zeros(thresholds + 1, np.float64).at[bucket].add(positive)
        batch_neg = jnp.zeros(thresholds + 1, np.float64).at[bucket].add(1.0 - positive)
        pos, neg = stat_pos + batch_pos, stat_neg + batch_neg
        return area_under_counts(pos, neg, jnp), area_under_counts(batch_pos, batch_neg, jnp), pos, neg

    return run


LOWERINGS = {"accuracy": _accuracy, "precision_recall": _precision_recall, "auc": _auc}
