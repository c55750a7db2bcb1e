"""Classification metrics as ops: ``accuracy`` (top-k), ``precision_recall`` and ``auc`` (bucketed ROC AUC).

Each is one op, as in Paddle (whose ``accuracy``, ``precision_recall`` and
``auc`` ops these follow), so a printed program shows the metric, not the
dozen ops it is made of. Scores ``X`` / ``Predict`` are ``[N, C]`` floats and
need not be normalised; ``Label`` is ``[N]`` or ``[N, 1]`` of int32 or int64.
A class ranks before another when its score is higher, or equal with a lower
class index (``top_k``'s order); NaN ranks above every number (numpy's
``argmax`` and ``sort``). No gradient flows through a metric (they are in
``grad_makers.NON_DIFFERENTIABLE``).
"""
from __future__ import annotations

from ..dtypes import FLOAT_DTYPES, INT_DTYPES
from ..schema import Attr, TensorType, schema

COUNT_DTYPE = "float64"
"""The dtype of the ``auc`` bucket counts and of the AUC: whole numbers exact up to 2**53 rows."""

AVERAGES = ("binary", "macro")
"""``precision_recall``'s averages: class ``pos_label``'s, or the unweighted mean over every class."""


def _check_rows(ctx, slot: str) -> None:
    """Fail unless ``Label`` is [N] or [N, 1] with the row count N of ``slot`` (where both are known)."""
    x, label = ctx.input(slot), ctx.input("Label")
    if len(label.shape) not in (1, 2) or (len(label.shape) == 2 and label.shape[1] not in (1, -1)):
        ctx.fail(f"Label must be [N] or [N, 1] class ids, got {list(label.shape)}")
    n, m = x.shape[0], label.shape[0]
    if n >= 0 and m >= 0 and n != m:
        ctx.fail(f"{slot} has {n} rows but Label has {m}")


def _classes(ctx, slot: str = "X") -> int:
    x = ctx.input(slot)
    if len(x.shape) != 2:
        ctx.fail(f"{slot} must be [N, C] scores, got {list(x.shape)}")
    return x.shape[1]


def top_k_problem(k: int, shape) -> str | None:
    """Why ``accuracy`` cannot rank ``k`` classes of scores of ``shape``, or None when it can (or cannot tell yet:
    an unknown class count is checked at run time)."""
    classes = shape[-1] if len(shape) else -1
    if k < 1 or 0 <= classes < k:
        return f"k={k} must be between 0 and the size {classes} of the classes axis, and at least 1"
    return None


def _accuracy(ctx):
    x, k = ctx.input("X"), ctx.attr("k")
    if top_k_problem(k, x.shape):
        ctx.fail(top_k_problem(k, x.shape))
    _classes(ctx)
    _check_rows(ctx, "X")
    return {"Accuracy": TensorType((), x.dtype), "Correct": TensorType((), "int64"),
            "Total": TensorType((), "int64")}


def _precision_recall(ctx):
    x, average, pos_label = ctx.input("X"), ctx.attr("average"), ctx.attr("pos_label")
    if average not in AVERAGES:
        ctx.fail(f"average must be one of {', '.join(AVERAGES)}, got {average!r}")
    classes = _classes(ctx)
    if classes < 1:
        ctx.fail(f"X needs a known number of classes in its last dim, got {list(x.shape)}")
    if average == "binary" and not 0 <= pos_label < classes:
        ctx.fail(f"pos_label {pos_label} is not one of the {classes} classes")
    _check_rows(ctx, "X")
    return {"Precision": TensorType((), x.dtype), "Recall": TensorType((), x.dtype)}


def predict_problem(shape) -> str | None:
    """Why ``auc`` cannot take scores of ``shape``, or None when it can."""
    if len(shape) == 1 or (len(shape) == 2 and shape[1] in (1, 2)):
        return None
    return f"Predict must be [N, 2] class probabilities or [N, 1] / [N] positive probabilities, got {list(shape)}"


def _auc(ctx):
    p, buckets = ctx.input("Predict"), ctx.attr("num_thresholds") + 1
    if ctx.attr("num_thresholds") < 1:
        ctx.fail(f"auc needs num_thresholds >= 1, got {ctx.attr('num_thresholds')}")
    if predict_problem(p.shape):
        ctx.fail(predict_problem(p.shape))
    _check_rows(ctx, "Predict")
    for slot in ("StatPos", "StatNeg"):
        if tuple(ctx.input(slot).shape) != (buckets,):
            ctx.fail(f"{slot} must be [num_thresholds + 1] = [{buckets}] counts, got {list(ctx.input(slot).shape)}")
    counts = TensorType((buckets,), COUNT_DTYPE)
    return {"AUC": TensorType((), COUNT_DTYPE), "BatchAUC": TensorType((), COUNT_DTYPE), "StatPosOut": counts,
            "StatNegOut": counts}


SCHEMAS = (
    schema("accuracy", ["X", "Label"], ["Accuracy", "Correct", "Total"], _accuracy, {"k": Attr("int", 1)},
           doc="Accuracy = Correct / Total in X's dtype: the fraction of rows whose Label is among the k classes "
               "ranked first (ties: the lower class first); Correct and Total are int64 counts; an empty batch "
               "is NaN (the mean of nothing).",
           dtypes={"X": FLOAT_DTYPES, "Label": INT_DTYPES}),
    schema("precision_recall", ["X", "Label"], ["Precision", "Recall"], _precision_recall,
           {"average": Attr("str", "binary"), "pos_label": Attr("int", 1)},
           doc="Per class c of the argmax predictions: Precision = hits / predicted c, Recall = hits / labelled "
               "c, each 0 when its denominator is (zero_division=0); class pos_label's (binary) or the mean over "
               "classes (macro), in X's dtype.",
           dtypes={"X": FLOAT_DTYPES, "Label": INT_DTYPES}),
    schema("auc", ["Predict", "Label", "StatPos", "StatNeg"], ["AUC", "BatchAUC", "StatPosOut", "StatNegOut"], _auc,
           {"num_thresholds": Attr("int", 2 ** 12 - 1)},
           doc="Adds this batch's positive (Label != 0) and negative rows to the per-bucket counts, in place "
               "(StatPosOut names StatPos' var); a row's bucket is p * num_thresholds clipped to [0, "
               "num_thresholds] and floored, p its last column's score in float64. AUC is the ROC area of the "
               "updated counts, BatchAUC of this batch's; rows in one bucket count as half a pair; 0 without "
               "both classes.",
           dtypes={"Predict": FLOAT_DTYPES, "Label": INT_DTYPES, "StatPos": (COUNT_DTYPE,), "StatNeg": "StatPos"}),
)

__all__ = ["AVERAGES", "COUNT_DTYPE", "SCHEMAS", "predict_problem", "top_k_problem"]
