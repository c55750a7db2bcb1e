"""Kernels of the metric ops (``program/ops/metrics.py``): counts in int64, ratios in float64 rounded once to the
scores' dtype, no gradient.

A class ranks before another when its score is higher, or equal with a lower index; NaN ranks above every number
(numpy's ``argmax`` and ``sort`` order), so ``accuracy`` with k = 1 agrees with ``argmax``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["KERNELS", "area_under_counts", "class_ids", "label_ranks"]


def class_ids(label: np.ndarray, rows: int, classes: int, op: str) -> np.ndarray:
    """``label`` ([N] or [N, 1]) as N int64 class ids, after checking there are ``rows`` of them, each a class."""
    ids = label.reshape(-1).astype(np.int64, copy=False)
    if ids.size != rows:
        raise ValueError(f"{op}: Label has {ids.size} ids for {rows} rows of scores")
    bad = (ids < 0) | (ids >= classes)
    if bad.any():
        raise ValueError(f"{op}: Label holds class id {ids[bad][0]}, outside [0, {classes})")
    return ids


def label_ranks(x, ids, xp=np):
    """Per row, how many classes rank before the labelled one (its 0-based place in ``top_k``'s order). Written
    once over the array module ``xp``: numpy here, ``jax.numpy`` in the xla lowering."""
    mine = xp.take_along_axis(x, ids[:, None], 1) if x.shape[0] else xp.zeros((0, 1), x.dtype)
    nan, mine_nan = xp.isnan(x), xp.isnan(mine)
    higher = (x > mine) | (nan & ~mine_nan)
    same = (x == mine) | (nan & mine_nan)
    return xp.count_nonzero(higher | (same & (xp.arange(x.shape[1]) < ids[:, None])), axis=1)


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


def area_under_counts(positives, negatives, xp=np):
    """The ROC AUC of per-bucket counts (bucket i scores below bucket i + 1), rows in one bucket counting as half a
    pair: each negative adds the positives above its bucket and half of those in it. 0 without both classes.
    Whole (or half) numbers, exact in float64 whatever the order of the sums (``xp`` as ``label_ranks``')."""
    above = xp.sum(positives) - xp.cumsum(positives)
    pairs = xp.sum(negatives * (above + 0.5 * positives))
    return xp.asarray(pairs / xp.maximum(xp.sum(positives) * xp.sum(negatives), 1.0), np.float64)


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
