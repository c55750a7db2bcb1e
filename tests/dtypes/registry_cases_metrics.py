"""Registry cases for the metric ops: accuracy, precision_recall and auc (see ``registry_cases``)."""
from __future__ import annotations

from .registry_builders import Built, Draw, one_op


def _scores_and_labels(g: Draw, slot: str) -> tuple[dict, int]:
    """[N, C] scores (ties common) and [N] or [N, 1] class ids in [0, C), N from 0; returns (inputs, C)."""
    rows, classes = g.int(0, 4), g.int(1, 4)
    ids = g.rng.integers(0, classes, rows).astype(g.dtype("Label"))
    return {slot: g.array([rows, classes], g.dtype(slot)), "Label": ids.reshape(-1, 1) if g.flag() else ids}, classes


def _accuracy(g: Draw) -> Built:
    inputs, classes = _scores_and_labels(g, "X")
    return one_op(g, inputs, {"k": g.int(1, classes)})


def _precision_recall(g: Draw) -> Built:
    inputs, classes = _scores_and_labels(g, "X")
    attrs = {"average": "macro" if g.flag() else "binary", "pos_label": g.int(0, classes - 1)}
    return one_op(g, inputs, attrs, known=("X",))  # the class count must be known


def _auc(g: Draw) -> Built:
    rows, thresholds = g.int(0, 4), g.int(1, 9)
    shape = [rows] + ([g.int(1, 2)] if g.flag() else [])
    inputs = {"Predict": g.array(shape, g.dtype("Predict"), 0, 1), "Label": g.array([rows], g.dtype("Label"), -1, 2),
              **{s: g.rng.integers(0, 3, thresholds + 1).astype(g.dtype("StatPos")) for s in ("StatPos", "StatNeg")}}
    return one_op(g, inputs, {"num_thresholds": thresholds}, known=("Predict", "StatPos", "StatNeg"))


CASES_METRICS = {"accuracy": _accuracy, "precision_recall": _precision_recall, "auc": _auc}
"""op type -> the builder of one valid case of it."""

__all__ = ["CASES_METRICS"]
