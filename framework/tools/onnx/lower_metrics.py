"""Lowerings of the metric ops (``program/ops/metrics.py``): ONNX has no metric op, so each is a composition of
ordinary nodes, which a re-import brings back as ordinary gradgen ops.

``accuracy`` is ``TopK`` (which, like the kernel, puts the lower index first on ties) and ``Equal`` with the
labels, summed; ``precision_recall`` counts one-hot ``ArgMax`` predictions (a row's first NaN where it has one) and
labels per class; ``auc`` adds each row into its bucket with ``ScatterElements`` (reduction ``add``) and sums the
pairs with a reversed exclusive ``CumSum``. Ratios are taken in double and cast once to the op's dtype, as the
engines do. What the engines refuse at run time has no ONNX check: a label outside ``[0, C)`` counts in no class;
a NaN prediction's bucket, Cast's integer for NaN, is outside ScatterElements' range, which fails the run.
"""
from __future__ import annotations

import numpy as np

from .context import Lowering
from .graph import onnx_dtype
from .lower_math import reduce_node, rounded_once

__all__ = ["LOWERINGS", "OWN_EXPORTS"]

_DOUBLE = onnx_dtype("float64")


def _ids(ctx: Lowering, shape: list[int]) -> str:
    """The labels as int64 class ids shaped ``shape`` ([-1] or [-1, 1])."""
    return ctx.g.node("Reshape", [ctx.g.node("Cast", [ctx.x("Label")], to=onnx_dtype("int64")), ctx.g.ints(shape)])


def _count(ctx: Lowering, hits: str, axes: list[int] | None, to: str = "float64") -> str:
    """How many of bool ``hits`` are true over ``axes`` (None: all), as ``to``."""
    return reduce_node(ctx, "ReduceSum", ctx.g.node("Cast", [hits], to=onnx_dtype(to)), axes, False)


def _quotient(ctx: Lowering, num: str, den: str) -> str:
    """``num / den`` in double (0 / 0 is NaN)."""
    return ctx.g.node("Div", [ctx.g.node("Cast", [num], to=_DOUBLE), ctx.g.node("Cast", [den], to=_DOUBLE)])


def accuracy(ctx):
    g = ctx.g
    _, top = g.node_multi("TopK", [ctx.x(), g.ints([ctx.attr("k")])], [g.names.fresh("top_k"),
                          g.names.fresh("top_k_ids")], axis=1, largest=1, sorted=1)
    ids = _ids(ctx, [-1, 1])
    correct = _count(ctx, g.node("Equal", [top, ids]), None, "int64")  # k distinct ids: at most one hit a row
    # one per row (an id equals itself): the row count as a value a re-import can compute (it reads no Shape value)
    total = _count(ctx, g.node("Equal", [ids, ids]), None, "int64")
    ctx.emit("Cast", [rounded_once(ctx, _quotient(ctx, correct, total), ctx.dtype())], "Accuracy",
             to=onnx_dtype(ctx.dtype()))
    ctx.finish(correct, "Correct")
    ctx.finish(total, "Total")


def _argmax(ctx: Lowering) -> str:
    """Each row's predicted class, [N, 1]: its first maximum, or its first NaN, which the engines (numpy's argmax)
    rank above every number and ONNX Runtime's ArgMax passes by."""
    g, x = ctx.g, ctx.x()
    nan = g.node("Cast", [g.node("IsNaN", [x])], to=onnx_dtype("float32"))
    has_nan = g.node("Cast", [reduce_node(ctx, "ReduceMax", nan, [1], True)], to=onnx_dtype("bool"))
    return g.node("Where", [has_nan, g.node("ArgMax", [nan], axis=1, keepdims=1),
                            g.node("ArgMax", [x], axis=1, keepdims=1)])


def precision_recall(ctx):
    g, classes = ctx.g, ctx.var().shape[1]
    every = g.const(np.arange(classes, dtype=np.int64).reshape(1, classes))
    predicted = g.node("Equal", [_argmax(ctx), every])  # the first on ties
    labelled = g.node("Equal", [_ids(ctx, [-1, 1]), every])
    hits = _count(ctx, g.node("And", [predicted, labelled]), [0])
    for slot, totals in (("Precision", _count(ctx, predicted, [0])), ("Recall", _count(ctx, labelled, [0]))):
        per_class = g.node("Div", [hits, g.node("Max", [totals, ctx.scalar(1.0, "float64")])])
        if ctx.attr("average") == "macro":
            score = reduce_node(ctx, "ReduceMean", per_class, [0], False)
        else:
            score = g.node("Gather", [per_class, g.const(np.int64(ctx.attr("pos_label")))], axis=0)
        ctx.emit("Cast", [rounded_once(ctx, score, ctx.dtype())], slot, to=onnx_dtype(ctx.dtype()))


def _area(ctx: Lowering, positives: str, negatives: str) -> str:
    """The ROC AUC of per-bucket counts: each negative adds the positives above its bucket and half of those in it,
    over the number of pairs (at least 1, so 0 without both classes)."""
    g = ctx.g
    above = g.node("CumSum", [positives, g.const(np.int64(0))], exclusive=1, reverse=1)
    half = g.node("Mul", [positives, ctx.scalar(0.5, "float64")])
    pairs = reduce_node(ctx, "ReduceSum", g.node("Mul", [negatives, g.node("Add", [above, half])]), None, False)
    total = g.node("Mul", [reduce_node(ctx, "ReduceSum", positives, None, False),
                           reduce_node(ctx, "ReduceSum", negatives, None, False)])
    return g.node("Div", [pairs, g.node("Max", [total, ctx.scalar(1.0, "float64")])])


def auc(ctx):
    g, thresholds = ctx.g, float(ctx.attr("num_thresholds"))
    predict = ctx.x("Predict")
    if ctx.rank("Predict") == 2:  # the last column: the positive class's probability
        width = ctx.var("Predict").shape[1]
        predict = g.node("Slice", [predict, g.ints([width - 1]), g.ints([width]), g.ints([1])])
    p = g.node("Cast", [g.node("Reshape", [predict, g.ints([-1])])], to=_DOUBLE)
    scaled = g.node("Clip", [g.node("Mul", [p, ctx.scalar(thresholds, "float64")]), ctx.scalar(0.0, "float64"),
                             ctx.scalar(thresholds, "float64")])
    bucket = g.node("Cast", [scaled], to=onnx_dtype("int64"))  # truncation is the floor of a number >= 0
    label = g.node("Reshape", [ctx.x("Label"), g.ints([-1])])
    positive = g.node("Cast", [g.node("Not", [g.node("Equal", [label, ctx.scalar(0, ctx.dtype("Label"))])])],
                      to=_DOUBLE)
    negative = g.node("Sub", [ctx.scalar(1.0, "float64"), positive])
    empty = g.const(np.zeros(int(thresholds) + 1))
    batch = [g.node("ScatterElements", [empty, bucket, rows], axis=0, reduction="add") for rows in (positive, negative)]
    counts = [ctx.emit("Add", [ctx.x(stat), rows], f"{stat}Out") for stat, rows in zip(("StatPos", "StatNeg"), batch)]
    ctx.finish(_area(ctx, *counts), "AUC")
    ctx.finish(_area(ctx, *batch), "BatchAUC")


LOWERINGS = {"accuracy": accuracy, "precision_recall": precision_recall, "auc": auc}
"""gradgen op type -> lowering."""

OWN_EXPORTS = {t: f"{n} outputs (the derived export takes one)"
               for t, n in (("accuracy", "three"), ("precision_recall", "two"), ("auc", "four"))}
"""Ops with a formula (``OpSchema.compute``) exported here rather than from it (``lower_derived``), and why."""
