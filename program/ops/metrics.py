"""Classification metrics as ops: ``accuracy`` (top-k), ``precision_recall`` and ``auc`` (bucketed ROC AUC).

Each is one op, as in Paddle (whose ``accuracy``, ``precision_recall`` and
``auc`` ops these follow), so a printed program shows the metric, not the
dozen ops it is made of. Scores ``X`` / ``Predict`` are ``[N, C]`` floats and
need not be normalised; ``Label`` is ``[N]`` or ``[N, 1]`` of int32 or int64.
A class ranks before another when its score is higher, or equal with a lower
class index (``top_k``'s order); NaN ranks above every number (numpy's
``argmax`` and ``sort``). No gradient flows through a metric (they are in
``grad_makers.NON_DIFFERENTIABLE``).

Each op's math is its ``compute`` over ``xp``: counts in int64 (``xp.tally``, each engine's bincount), ratios in
float64 rounded once to the scores' dtype. A label outside ``[0, C)`` and a NaN prediction are refused through
``xp.check``; a label count other than the rows' and a k above a class count met at run time are refused at once.
"""
from __future__ import annotations

from ..dtypes import FLOAT_DTYPES, INT_DTYPES
from ..schema import Attr, TensorType, schema
from .creation import rounded
from .nn import check_ids

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


def class_ids(xp, label, rows: int, classes: int, op: str):
    """``label`` ([N] or [N, 1]) as N int64 class ids, after checking there are ``rows`` of them, each a class."""
    ids = xp.astype(xp.reshape(label, (-1,)), xp.int64)
    if ids.shape[0] != rows:
        raise ValueError(f"{op}: Label has {ids.shape[0]} ids for {rows} rows of scores")
    check_ids(xp, ids, classes, f"{op}: a Label class id is outside [0, {classes})", "class id",
              before=f"{op}: Label's ")
    return ids


def label_ranks(xp, x, ids):
    """Per row, how many classes rank before the labelled one (its 0-based place in ``top_k``'s order): a higher
    score, or an equal one with a lower index; NaN above every number."""
    mine = xp.take_along_axis(x, ids[:, None], 1) if x.shape[0] else xp.zeros((0, 1), x.dtype)
    nan, mine_nan = xp.isnan(x), xp.isnan(mine)
    higher = (x > mine) | (nan & ~mine_nan)
    same = (x == mine) | (nan & mine_nan)
    return xp.sum(higher | (same & (xp.arange(x.shape[1]) < ids[:, None])), axis=1)


def _ratio(xp, num, den: int, dtype):
    """``num / den`` in float64 (NaN for none: the mean of nothing), rounded once to ``dtype``."""
    ratio = xp.astype(num, xp.float64) / den if den else xp.asarray(float("nan"), dtype=xp.float64)
    return rounded(xp, ratio, dtype)


def accuracy(xp, x, label, *, k: int) -> tuple:
    """(Accuracy, Correct, Total): the rows whose label ranks among the first k (``label_ranks``)."""
    rows, classes = x.shape
    if k > classes:
        raise ValueError(f"accuracy: k={k} is more than the {classes} classes")
    ids = class_ids(xp, label, rows, classes, "accuracy")
    correct = xp.sum(xp.astype(label_ranks(xp, x, ids) < k, xp.int64))
    return _ratio(xp, correct, rows, x.dtype), correct, xp.asarray(rows, dtype=xp.int64)


def precision_recall(xp, x, label, *, average: str, pos_label: int) -> tuple:
    """(Precision, Recall) of the argmax predictions (the first class on ties, NaN first): per class, hits over
    predicted and over labelled (0 where nothing was), class ``pos_label``'s or the mean over classes."""
    rows, classes = x.shape
    ids = class_ids(xp, label, rows, classes, "precision_recall")
    predicted = xp.argmax(x, axis=1)
    hits = xp.tally(xp.where(predicted == ids, ids, classes), classes + 1)[:classes]  # a miss counts in class C

    def score(totals):
        per_class = xp.astype(hits, xp.float64) / xp.astype(xp.maximum(totals, 1), xp.float64)
        return rounded(xp, xp.sum(per_class) / classes if average == "macro" else per_class[pos_label], x.dtype)

    return score(xp.tally(predicted, classes)), score(xp.tally(ids, classes))


def area_under_counts(xp, positives, negatives):
    """The ROC AUC of per-bucket counts (bucket i scores below bucket i + 1), rows in one bucket counting as half a
    pair: each negative adds the positives above its bucket and half of those in it. 0 without both classes.
    Whole (or half) numbers, exact in float64 whatever the order of the sums."""
    above = xp.sum(positives) - xp.cumsum(positives, axis=0)
    pairs = xp.sum(negatives * (above + 0.5 * positives))
    return pairs / xp.maximum(xp.sum(positives) * xp.sum(negatives), 1.0)


def auc(xp, predict, label, stat_pos, stat_neg, *, num_thresholds: int) -> tuple:
    """(AUC, BatchAUC, StatPosOut, StatNegOut): each row counted in bucket floor(clip(p * T, 0, T)) of its class's
    counts (p its last column's score in float64, positive when Label != 0), added to the carried counts."""
    p = xp.astype(predict if predict.ndim == 1 else predict[:, -1], xp.float64)
    labels = xp.reshape(label, (-1,))
    if labels.shape[0] != p.shape[0]:
        raise ValueError(f"auc: Label has {labels.shape[0]} ids for {p.shape[0]} rows of Predict")
    xp.check(xp.all(~xp.isnan(p)), ValueError("auc: Predict holds NaN, which falls in no bucket"))
    buckets = num_thresholds + 1
    bucket = xp.astype(xp.clip(p * num_thresholds, 0, num_thresholds), xp.int64)  # the floor of a number >= 0
    counts = xp.astype(xp.tally(xp.where(labels != 0, bucket, bucket + buckets), 2 * buckets), xp.float64)
    batch_pos, batch_neg = counts[:buckets], counts[buckets:]
    pos, neg = stat_pos + batch_pos, stat_neg + batch_neg
    return area_under_counts(xp, pos, neg), area_under_counts(xp, batch_pos, batch_neg), pos, neg


SCHEMAS = (
    schema("accuracy", ["X", "Label"], ["Accuracy", "Correct", "Total"], _accuracy, {"k": Attr("int", 1)},
           doc="Accuracy = Correct / Total in X's dtype: the fraction of rows whose Label is among the k classes "
               "ranked first (ties: the lower class first); Correct and Total are int64 counts; an empty batch "
               "is NaN (the mean of nothing).",
           dtypes={"X": FLOAT_DTYPES, "Label": INT_DTYPES}, compute=accuracy),
    schema("precision_recall", ["X", "Label"], ["Precision", "Recall"], _precision_recall,
           {"average": Attr("str", "binary"), "pos_label": Attr("int", 1)},
           doc="Per class c of the argmax predictions: Precision = hits / predicted c, Recall = hits / labelled "
               "c, each 0 when its denominator is (zero_division=0); class pos_label's (binary) or the mean over "
               "classes (macro), in X's dtype.",
           dtypes={"X": FLOAT_DTYPES, "Label": INT_DTYPES}, compute=precision_recall),
    schema("auc", ["Predict", "Label", "StatPos", "StatNeg"], ["AUC", "BatchAUC", "StatPosOut", "StatNegOut"], _auc,
           {"num_thresholds": Attr("int", 2 ** 12 - 1)},
           doc="Adds this batch's positive (Label != 0) and negative rows to the per-bucket counts, in place "
               "(StatPosOut names StatPos' var); a row's bucket is p * num_thresholds clipped to [0, "
               "num_thresholds] and floored, p its last column's score in float64. AUC is the ROC area of the "
               "updated counts, BatchAUC of this batch's; rows in one bucket count as half a pair; 0 without "
               "both classes.",
           dtypes={"Predict": FLOAT_DTYPES, "Label": INT_DTYPES, "StatPos": (COUNT_DTYPE,), "StatNeg": "StatPos"},
           compute=auc),
)

__all__ = ["AVERAGES", "COUNT_DTYPE", "SCHEMAS", "accuracy", "area_under_counts", "auc", "class_ids", "label_ranks",
           "precision_recall", "predict_problem", "top_k_problem"]
