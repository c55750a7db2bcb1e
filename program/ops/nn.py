"""Softmax and the classification losses."""
from __future__ import annotations

from ..dtypes import FLOAT_DTYPES, INT_DTYPES, NUMERIC_DTYPES
from ..schema import Attr, TensorType, schema
from ..shapes import dims_agree, normalize_axis, shapes_agree


IGNORE_INDEX = -100
"""The default ``ignore_index`` of the hard-label losses, as in Paddle and PyTorch."""


def _float_like(ctx):
    x = ctx.input("X")
    normalize_axis(ctx.attr("axis"), len(x.shape))
    return {"Out": x}


def _check_label(ctx, x: TensorType, label: TensorType, axis: int, soft: bool) -> None:
    """Soft labels match x; hard labels are ints shaped like x with 1 (or nothing) on the class axis."""
    if soft:
        if label.dtype != x.dtype or not shapes_agree(label.shape, x.shape):
            ctx.fail(f"soft labels must be {x.dtype}{list(x.shape)}, got {label.dtype}{list(label.shape)}")
        return
    if label.dtype not in INT_DTYPES:
        ctx.fail(f"hard labels must be int32 or int64, got {label.dtype} (soft_label=True for probabilities)")
    with_axis = tuple(1 if i == axis else d for i, d in enumerate(x.shape))
    without = tuple(d for i, d in enumerate(x.shape) if i != axis)
    if not (shapes_agree(label.shape, with_axis) or shapes_agree(label.shape, without)):
        ctx.fail(f"hard labels must have shape {list(with_axis)} or {list(without)}, got {list(label.shape)}")


def _cross_entropy(ctx):
    x, label = ctx.input("X"), ctx.input("Label")
    axis = len(x.shape) - 1
    _check_label(ctx, x, label, axis, ctx.attr("soft_label"))
    return {"Out": TensorType(tuple(x.shape[:-1]) + (1,), x.dtype)}


def _softmax_with_cross_entropy(ctx):
    logits, label = ctx.input("Logits"), ctx.input("Label")
    axis = normalize_axis(ctx.attr("axis"), len(logits.shape))
    _check_label(ctx, logits, label, axis, ctx.attr("soft_label"))
    loss = tuple(1 if i == axis else d for i, d in enumerate(logits.shape))
    return {"Softmax": logits, "Loss": TensorType(loss, logits.dtype)}


def first_out_of_range(ids, size: int, what: str, ignored: int | None = None) -> ValueError | None:
    """A ValueError naming the first of ``ids`` (an array numpy reads: numpy's or a CPU tensor) outside
    [0, size), other than ``ignored``, and how many there are; None when there is none."""
    import numpy as np  # a failing run's message only: the IR itself needs no numpy

    ids = np.asarray(ids)
    bad = (ids < 0) | (ids >= size)
    if ignored is not None:
        bad &= ids != ignored
    if not bad.any():
        return None
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    also = f" and is not ignore_index {ignored}" if ignored is not None else ""
    return ValueError(f"{what} {int(ids[where])} at index {list(where)} is outside [0, {size}){also} "
                      f"({int(bad.sum())} such value(s))")


def check_ids(xp, ids, size: int, error: str, what: str, ignored: int | None = None, before: str = "") -> None:
    """Refuse an entry of ``ids`` outside [0, size), other than ``ignored``, on every engine (``xp.check``): the
    engines that run eagerly name the first one (``before`` its ``first_out_of_range`` words), the tracing one
    states ``error``."""
    ok = (ids >= 0) & (ids < size)
    if ignored is not None:
        ok = ok | (ids == ignored)
    xp.check(xp.all(ok), ValueError(error),
             detail=lambda: ValueError(before + str(first_out_of_range(ids, size, what, ignored))))


def hard_labels(xp, label, x_shape, axis: int, ignored: int) -> tuple:
    """Hard labels as indices of x's rank along ``axis`` (ignored ones read as class 0) and the mask of the kept
    ones. A label outside [0, classes) that is not ``ignored`` is refused on every engine (numpy would read -1 as
    the last class, XLA would clamp it to one)."""
    check_label_shape(label, tuple(x_shape), axis)
    classes = x_shape[axis]
    check_ids(xp, label, classes, f"a label is outside [0, {classes}) and is not ignore_index {ignored}", "label",
              ignored)
    index = xp.astype(label if label.ndim == len(x_shape) else xp.expand_dims(label, axis), xp.int64)
    kept = index != ignored
    return xp.where(kept, index, 0), kept


def cross_entropy(xp, x, label, *, soft_label: bool, ignore_index: int):
    """-log(X[label]) over X's last axis (0 for an ignored label), or -sum(label * log X) for soft labels. Its inputs
    come as given (``inputs_as_given``): cast to X's dtype, a float16 holds an integer label exactly only up to
    2048."""
    if soft_label:
        check_label_shape(label, tuple(x.shape), None, "X")
        return -xp.sum(label * xp.log(x), axis=-1, keepdims=True)
    index, kept = hard_labels(xp, label, x.shape, x.ndim - 1, ignore_index)
    picked = xp.take_along_axis(x, index, axis=-1)
    return xp.where(kept, -xp.log(xp.where(kept, picked, 1)), 0)


def softmax_with_cross_entropy(xp, logits, label, *, soft_label: bool, axis: int, ignore_index: int) -> tuple:
    """(softmax, loss): the loss from log_softmax, never from log(softmax), so it stays finite for any finite
    logits; soft labels summed against it, hard ones picked, an ignored one giving 0."""
    axis = normalize_axis(axis, logits.ndim)
    log_p = log_softmax(xp, logits, axis=axis)
    if soft_label:
        check_label_shape(label, tuple(logits.shape), None)
        loss = -xp.sum(label * log_p, axis=axis, keepdims=True)
    else:
        index, kept = hard_labels(xp, label, logits.shape, axis, ignore_index)
        loss = xp.where(kept, -xp.take_along_axis(log_p, index, axis=axis), 0)
    return xp.exp(log_p), xp.astype(loss, logits.dtype)


def _sigmoid_ce(ctx):
    x, label = ctx.input("X"), ctx.input("Label")
    if len(label.shape) != len(x.shape) or not all(dims_agree(a, b) for a, b in zip(label.shape, x.shape)):
        ctx.fail(f"Label must be {x.dtype}{list(x.shape)}, got {label.dtype}{list(label.shape)}")
    return {"Out": x}


def check_label_shape(label, x_shape, axis: int | None, what: str = "Logits") -> None:
    """Labels must have the run-time shape x's declared shape promised (-1 dims can differ at run time): x's own
    (``axis`` None: soft labels), or x's with size 1 on ``axis`` or without it (hard labels). numpy would
    broadcast a mismatch into a loss of another shape. Shapes are known when a kernel runs and when a lowering is
    traced, so every engine refuses a wrong one with this message."""
    shape = tuple(label.shape)
    if axis is None:
        allowed = [tuple(x_shape)]
    else:
        allowed = [tuple(1 if i == axis else d for i, d in enumerate(x_shape)),
                   tuple(d for i, d in enumerate(x_shape) if i != axis)]
    if shape not in allowed:
        raise ValueError(f"Label has run-time shape {list(shape)}, but {what} {list(x_shape)} needs "
                         + " or ".join(str(list(a)) for a in allowed))


def sigmoid_cross_entropy_with_logits(xp, x, label):
    """max(X, 0) - X * Label + log(1 + exp(-|X|)), elementwise: the exp never overflows."""
    check_label_shape(label, tuple(x.shape), None, "X")
    return xp.maximum(x, 0) - x * label + xp.log1p(xp.exp(-xp.abs(x)))


# Softmax's math, once, over ``xp`` (``OpSchema.compute``); the softmax cross-entropy's kernels build on it too.
def minus_max(xp, x, top):
    """``x - top``, ``top`` x's max along an axis (kept), with exactly 0 where x is its finite max, as IEEE
    arithmetic gives. XLA's CPU code fuses the multiply that made x (a scaled score) into the subtraction, one
    rounding fewer: the max's own entry comes out as the product's rounding error, -2.7e4 or 1e17 for a score of
    7e25, and exp of that is 0 or inf, where it is 1 (``design_docs/numerics.md``)."""
    return xp.where((x == top) & xp.isfinite(top), xp.zeros((), x.dtype), x - top)


def _shifted(xp, x, axis: int):
    return minus_max(xp, x, xp.max(x, axis=axis, keepdims=True))


def softmax(xp, x, *, axis):
    """exp(X - max) / sum(exp(X - max)) along ``axis``; along an empty axis, nothing (no max to subtract)."""
    axis = normalize_axis(axis, x.ndim)
    if x.shape[axis] == 0:
        return x
    e = xp.exp(_shifted(xp, x, axis))
    return e / xp.sum(e, axis=axis, keepdims=True)


def softmax_aten(ops, x, *, axis):
    """``softmax`` as ATen's ``_softmax`` (the same max-shifted exponentials, scaled by their sum; None for a 0-d X).
    The torch engine calls it on finite X only (an infinity makes ATen's row and the compute's NaN in other places),
    and its output then lies in [0, 1] (each exponential at most 1, their sum at least 1): ``aten_finite_out``.
    0.63 ms on the transformer's attention scores [16, 4, 128, 128] float32 over the last axis (two threads), the
    finiteness check included; the op's formulas 2.4-2.7."""
    return ops._softmax(x, normalize_axis(axis, x.ndim), False) if x.ndim else None


def log_softmax(xp, x, *, axis):
    """X - max - log(sum(exp(X - max))) along ``axis``: no overflow, no log(0) underflow."""
    axis = normalize_axis(axis, x.ndim)
    if x.shape[axis] == 0:
        return x
    shifted = _shifted(xp, x, axis)
    return shifted - xp.log(xp.sum(xp.exp(shifted), axis=axis, keepdims=True))


def _labelled(slot: str) -> dict:
    """Float inputs; labels are soft (floats, checked against the input's dtype in inference) or hard (ints)."""
    return {slot: FLOAT_DTYPES, "Label": NUMERIC_DTYPES}


SCHEMAS = (
    schema("softmax", ["X"], ["Out"], _float_like, {"axis": Attr("int", -1)},
           doc="exp(X) / sum(exp(X)) along `axis`, computed from X - max.", dtypes={"X": FLOAT_DTYPES},
           compute=softmax, aten=softmax_aten, aten_finite_out=True),
    schema("log_softmax", ["X"], ["Out"], _float_like, {"axis": Attr("int", -1)},
           doc="log(softmax(X)) along `axis`, computed as X - max - log(sum(exp(X - max))).",
           dtypes={"X": FLOAT_DTYPES}, compute=log_softmax),
    schema("cross_entropy", ["X", "Label"], ["Out"], _cross_entropy,
           {"soft_label": Attr("bool", False), "ignore_index": Attr("int", IGNORE_INDEX)},
           doc="-log(X[label]) (or -sum(label * log X)) over the last axis of probabilities X; keeps that axis. "
               "A hard label equal to `ignore_index` gives loss 0; any other label outside [0, classes) is a "
               "run-time error.",
           dtypes=_labelled("X"), compute=cross_entropy, inputs_as_given=True),
    schema("softmax_with_cross_entropy", ["Logits", "Label"], ["Softmax", "Loss"], _softmax_with_cross_entropy,
           {"soft_label": Attr("bool", False), "axis": Attr("int", -1), "ignore_index": Attr("int", IGNORE_INDEX)},
           doc="Softmax of Logits and the cross-entropy with Label, via log-sum-exp; Loss keeps the axis as 1. "
               "A hard label equal to `ignore_index` gives loss 0; any other label outside [0, classes) is a "
               "run-time error.",
           dtypes=_labelled("Logits"), compute=softmax_with_cross_entropy),
    schema("sigmoid_cross_entropy_with_logits", ["X", "Label"], ["Out"], _sigmoid_ce,
           doc="max(X, 0) - X * Label + log(1 + exp(-|X|)), elementwise.",
           dtypes={"X": FLOAT_DTYPES, "Label": "X"}, compute=sigmoid_cross_entropy_with_logits),
)


__all__ = ["SCHEMAS", "IGNORE_INDEX", "check_ids", "check_label_shape", "cross_entropy", "first_out_of_range",
           "hard_labels", "log_softmax", "minus_max", "sigmoid_cross_entropy_with_logits", "softmax", "softmax_aten",
           "softmax_with_cross_entropy"]
