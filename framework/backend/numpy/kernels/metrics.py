"""Kernels of the metric ops (``program/ops/metrics.py``): counts in int64, ratios in float64 rounded once to the
scores' dtype, no gradient. The ranking and the AUC formula are both engines' (``shared/metrics``).
"""
from __future__ import annotations

import numpy as np

from ...shared.metrics import area_under_counts, label_ranks

__all__ = ["KERNELS", "class_ids"]


def class_ids(label: np.ndarray, rows: int, classes: int, op: str) -> np.ndarray:
    """``label`` ([N] or [N, 1]) as N int64 class ids, after checking there are ``rows`` of them, each a class."""
    ids = label.reshape(-1).astype(np.int64, copy=False)
    if ids.size != rows:
        raise ValueError(f"{op}: Label has {ids.size} ids for {rows} rows of scores")
    bad = (ids < 0) | (ids >= classes)
    if bad.any():
        raise ValueError(f"{op}: Label holds class id {ids[bad][0]}, outside [0, {classes})")
    return ids


def _ratio(num, den, dtype) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(np.float64(num) / np.float64(den), dtype=dtype)


def accuracy(op):
    k, dtype = op.attr("k"), np.dtype(op.block.var(op.input("X")[0]).dtype)

    def run(x, label):
        rows, classes = x.shape
        if k > classes:
            raise ValueError(f"accuracy: k={k} is more than the {classes} classes")
        correct = int(np.count_nonzero(label_ranks(x, class_ids(label, rows, classes, "accuracy")) < k))
        return _ratio(correct, rows, dtype), np.asarray(correct, np.int64), np.asarray(rows, np.int64)

    return run


def precision_recall(op):
    macro, pos_label = op.attr("average") == "macro", op.attr("pos_label")
    dtype = np.dtype(op.block.var(op.input("X")[0]).dtype)

    def score(hits, totals):
        per_class = hits / np.maximum(totals, 1).astype(np.float64)  # 0 where nothing was predicted/labelled
        return np.asarray(np.mean(per_class) if macro else per_class[pos_label], dtype=dtype)

    def run(x, label):
        rows, classes = x.shape
        ids = class_ids(label, rows, classes, "precision_recall")
        predicted = np.argmax(x, axis=1) if rows else np.zeros(0, np.int64)  # the first class on ties
        hits = np.bincount(ids[predicted == ids], minlength=classes)
        return (score(hits, np.bincount(predicted, minlength=classes)),
                score(hits, np.bincount(ids, minlength=classes)))

    return run


def auc(op):
    thresholds = op.attr("num_thresholds")

    def run(predict, label, stat_pos, stat_neg):
        p = (predict if predict.ndim == 1 else predict[:, -1]).astype(np.float64)
        if np.isnan(p).any():
            raise ValueError("auc: Predict holds NaN, which falls in no bucket")
        if label.size != p.size:
            raise ValueError(f"auc: Label has {label.size} ids for {p.size} rows of Predict")
        bucket = np.floor(np.clip(p * thresholds, 0, thresholds)).astype(np.int64)
        positive = (label.reshape(-1) != 0).astype(np.float64)
        batch_pos = np.bincount(bucket, positive, minlength=thresholds + 1)
        batch_neg = np.bincount(bucket, 1.0 - positive, minlength=thresholds + 1)
        pos, neg = stat_pos + batch_pos, stat_neg + batch_neg
        return area_under_counts(pos, neg), area_under_counts(batch_pos, batch_neg), pos, neg

    return run


KERNELS = {"accuracy": accuracy, "precision_recall": precision_recall, "auc": auc}
