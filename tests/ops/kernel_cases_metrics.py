"""Kernel cases for the metric ops (accuracy, precision_recall, auc), each checked against a count written from the
definition with loops: float32 and float64 scores, int32 and int64 labels of shape [N] and [N, 1], ties, k up to
the class count, empty batches, and auc counts carried in from earlier runs."""
from __future__ import annotations

import numpy as np

from tests.framework.op_harness import Case

rng = np.random.default_rng(2323)
FLOATS = ("float32", "float64")


def scores(rows: int, classes: int, dtype: str, ties: bool) -> np.ndarray:
    """Unnormalised scores; with ``ties`` drawn from {0, 1, 2}, so most rows have equal scores."""
    values = rng.integers(0, 3, (rows, classes)) if ties else rng.normal(size=(rows, classes)) * 5
    return values.astype(dtype)


def labels(rows: int, classes: int, dtype: str, column: bool) -> np.ndarray:
    ids = rng.integers(0, classes, rows).astype(dtype)
    return ids.reshape(-1, 1) if column else ids


def ranks_before(row, label: int) -> int:
    """How many classes rank before ``label``: a higher score, or an equal one with a lower index."""
    return sum(1 for c, s in enumerate(row) if s > row[label] or (s == row[label] and c < label))


def accuracy_ref(x, label, k: int) -> dict:
    ids = [int(v) for v in np.ravel(label)]
    correct = sum(1 for row, y in zip(x, ids) if ranks_before(row, y) < k)
    with np.errstate(invalid="ignore"):
        ratio = np.float64(correct) / np.float64(len(ids))
    return {"Accuracy": [np.asarray(ratio, x.dtype)], "Correct": [np.int64(correct)], "Total": [np.int64(len(ids))]}


def precision_recall_ref(x, label, average: str, pos_label: int) -> dict:
    ids = [int(v) for v in np.ravel(label)]
    classes = x.shape[1]
    predicted = [min(c for c in range(classes) if row[c] == max(row)) for row in x]
    out = {}
    for slot, counted in (("Precision", predicted), ("Recall", ids)):
        per_class = []
        for c in range(classes):
            total = sum(1 for v in counted if v == c)
            hits = sum(1 for p, y in zip(predicted, ids) if p == y == c)
            per_class.append(hits / total if total else 0.0)
        out[slot] = [np.asarray(sum(per_class) / classes if average == "macro" else per_class[pos_label], x.dtype)]
    return out


def bucket_of(p: float, thresholds: int) -> int:
    return int(np.floor(min(max(float(p) * thresholds, 0.0), thresholds)))


def pair_auc(positives, negatives) -> float:
    """Mann-Whitney over bucket counts, pair by pair: a positive above a negative scores 1, in its bucket 1/2."""
    pairs = sum(positives[i] * negatives[j] * (1.0 if i > j else 0.5 if i == j else 0.0)
                for i in np.flatnonzero(positives) for j in np.flatnonzero(negatives))
    total = sum(positives) * sum(negatives)
    return pairs / total if total else 0.0


def auc_ref(predict, label, stat_pos, stat_neg, thresholds: int) -> dict:
    p = predict if predict.ndim == 1 else predict[:, -1]
    batch_pos, batch_neg = np.zeros(thresholds + 1), np.zeros(thresholds + 1)
    for score, y in zip(p, np.ravel(label)):
        (batch_pos if y != 0 else batch_neg)[bucket_of(score, thresholds)] += 1
    pos, neg = stat_pos + batch_pos, stat_neg + batch_neg
    return {"AUC": [np.float64(pair_auc(pos, neg))], "BatchAUC": [np.float64(pair_auc(batch_pos, batch_neg))],
            "StatPosOut": [pos], "StatNegOut": [neg]}


def accuracy_cases():
    for dtype in FLOATS:
        for rows, classes, k, ties, label_dtype, column in [
                (7, 5, 1, False, "int64", True), (7, 5, 2, True, "int32", False), (9, 4, 4, True, "int64", False),
                (6, 3, 3, False, "int32", True), (5, 1, 1, False, "int64", False), (0, 4, 2, False, "int64", True),
                (8, 6, 5, True, "int32", True)]:
            yield Case("accuracy", {"X": scores(rows, classes, dtype, ties),
                                    "Label": labels(rows, classes, label_dtype, column)},
                       lambda i, k=k: accuracy_ref(i["X"], i["Label"], k), {"k": k},
                       label=f"k={k},ties={ties}")


def precision_recall_cases():
    for dtype in FLOATS:
        for rows, classes, average, pos_label, ties, label_dtype, column in [
                (9, 4, "macro", 1, False, "int64", False), (9, 4, "binary", 3, True, "int32", True),
                (12, 2, "binary", 1, True, "int64", True), (6, 5, "macro", 0, True, "int32", False),
                (0, 3, "macro", 1, False, "int64", False), (0, 3, "binary", 2, False, "int32", True)]:
            yield Case("precision_recall", {"X": scores(rows, classes, dtype, ties),
                                            "Label": labels(rows, classes, label_dtype, column)},
                       lambda i, a=average, p=pos_label: precision_recall_ref(i["X"], i["Label"], a, p),
                       {"average": average, "pos_label": pos_label}, label=f"{average},pos={pos_label},ties={ties}")


def auc_cases():
    for dtype in FLOATS:
        for rows, columns, thresholds, label_dtype, carried in [
                (10, 2, 7, "int64", False), (12, 1, 100, "int32", True), (9, 0, 4095, "int64", True),
                (0, 2, 7, "int32", True), (6, 0, 1, "int64", False)]:
            p = rng.choice([0.0, 0.25, 0.5, 0.999, 1.0], rows) if thresholds < 10 else rng.uniform(size=rows)
            predict = {2: np.stack([1 - p, p], 1), 1: p[:, None], 0: p}[columns].astype(dtype)
            label = (rng.integers(0, 2, rows) * rng.choice([1, 3, -2], rows)).astype(label_dtype)  # non-zero: positive
            stats = [np.zeros(thresholds + 1) for _ in range(2)]
            for stat in stats if carried else ():  # a few buckets counted in earlier runs
                stat[rng.integers(0, thresholds + 1, 5)] += rng.integers(1, 4, 5)
            yield Case("auc", {"Predict": predict, "Label": label[:, None] if columns else label,
                               "StatPos": stats[0], "StatNeg": stats[1]},
                       lambda i, t=thresholds: auc_ref(i["Predict"], i["Label"], i["StatPos"], i["StatNeg"], t),
                       {"num_thresholds": thresholds}, label=f"thresholds={thresholds},carried={carried}")


METRIC_CASES = [*accuracy_cases(), *precision_recall_cases(), *auc_cases()]
"""The metric ops' kernel cases, part of ``tests/framework/op_cases.ALL_CASES``."""

__all__ = ["METRIC_CASES", "accuracy_ref", "auc_ref", "pair_auc", "precision_recall_ref"]
