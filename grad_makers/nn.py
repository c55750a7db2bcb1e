"""Gradients of softmax, log-softmax and the cross-entropy losses, written with ordinary ops."""
from __future__ import annotations

from gradgen.program.shapes import normalize_axis

from .base import grad_maker
from .families import unary


def _axis(op, name: str) -> int:
    return normalize_axis(op.attr("axis"), len(op.shape(name)))


def _softmax_backward(g, out, dout, axis: int):
    """dx = out * (dout - sum(dout * out, axis)), one fused ``softmax_grad`` op."""
    return g.op("softmax_grad", {"Out": out, "Out@GRAD": dout}, {"axis": axis}, outputs="X@GRAD")


def _keeps_class_axis(op, label: str, like: str) -> bool:
    """Whether hard labels come with the class axis as size 1 (``[..., 1, ...]``) rather than without it."""
    return len(op.shape(label)) == len(op.shape(like))


def _one_hot(g, op, label: str, like: str, axis: int):
    """Hard int labels as a float one-hot tensor shaped like ``like``, the classes along ``axis``.

    Out-of-range labels (only ignored ones reach a gradient: the forward kernel refuses the others) give
    all-zero rows.
    """
    like_t = op.var_type(like)
    rank = len(like_t.shape)
    if _keeps_class_axis(op, label, like):
        label = g.squeeze(label, [axis])
    hot = g.one_hot(label, like_t.shape[axis], like_t.dtype)  # the classes come last
    if axis == rank - 1:
        return hot
    return g.transpose(hot, list(range(axis)) + [rank - 1] + list(range(axis, rank - 1)))


def _kept(g, op, label: str, like: str, axis: int):
    """1.0 for each row whose label is not ``ignore_index``, 0.0 for the others; shaped like the loss."""
    ignored = g.op("fill_any_like", {"X": label}, {"value": float(op.attr("ignore_index"))})
    kept = g.cast(g.compare("not_equal", label, ignored), op.dtype(like))
    return kept if _keeps_class_axis(op, label, like) else g.unsqueeze(kept, [axis])


def _hard_label_grad(g, op, label: str, like: str, axis: int, dout):
    """The one-hot target and the output gradient with ignored rows zeroed, for the hard-label losses."""
    return _one_hot(g, op, label, like, axis), g.mul(dout, _kept(g, op, label, like, axis))


softmax_grad = unary("softmax", emits=("softmax_grad",),
                     rule=lambda g, x, out, dout, op: _softmax_backward(g, out, dout, _axis(op, out)))
log_softmax_grad = unary("log_softmax", emits=("reduce_sum", "exp", "elementwise_mul", "elementwise_sub"),
                         rule=lambda g, x, out, dout, op: g.sub(dout, g.mul(
                             g.exp(out), g.reduce_sum(dout, [_axis(op, out)], keep_dim=True))))
"""dx = dout - softmax * sum(dout, axis), with softmax = exp(out)."""


_HARD_LABELS = ("squeeze", "one_hot", "transpose", "fill_any_like", "not_equal", "cast", "unsqueeze")
"""What turning hard labels into a one-hot target and a mask of kept rows records."""


@grad_maker("cross_entropy", emits=_HARD_LABELS + ("elementwise_div", "elementwise_mul", "scale", "log"))
def cross_entropy_grad(g, op):
    """Out = -sum(label * log(X)) over the last axis: dX = -dout * label / X (0 on rows of ``ignore_index``);
    soft labels get dLabel = -dout * log(X)."""
    x, label, dout = op.input("X"), op.input("Label"), op.grad("Out")
    if op.attr("soft_label"):
        return {"X": g.neg(g.mul(g.div(label, x), dout)), "Label": g.neg(g.mul(g.log(x), dout))}
    target, dout = _hard_label_grad(g, op, label, x, len(op.shape(x)) - 1, dout)
    return {"X": g.neg(g.mul(g.div(target, x), dout)), "Label": None}


@grad_maker("softmax_with_cross_entropy", emits=_HARD_LABELS + (
    "elementwise_sub", "elementwise_mul", "reduce_sum", "elementwise_add", "log_softmax", "scale", "softmax_grad"))
def softmax_with_cross_entropy_grad(g, op):
    """Loss = -sum(q * log_softmax(z)): dz = (softmax * sum(q) - q) * dLoss, which is softmax - q when the labels
    sum to 1 (hard labels: q one-hot, and dz = 0 on rows of ``ignore_index``); dq = -log_softmax(z) * dLoss.
    Plus softmax's own backward if its output was used."""
    logits, label, softmax, dloss = op.input("Logits"), op.input("Label"), op.output("Softmax"), op.grad("Loss")
    axis = _axis(op, logits)
    if op.attr("soft_label"):
        dlogits = g.mul(g.sub(g.mul(softmax, g.reduce_sum(label, [axis], keep_dim=True)), label), dloss)
        dlabel = g.neg(g.mul(g.op("log_softmax", {"X": logits}, {"axis": axis}), dloss))
    else:
        target, dloss = _hard_label_grad(g, op, label, logits, axis, dloss)
        dlogits, dlabel = g.mul(g.sub(softmax, target), dloss), None
    if op.has_grad("Softmax"):
        dlogits = g.add(dlogits, _softmax_backward(g, softmax, op.grad("Softmax"), axis))
    return {"Logits": dlogits, "Label": dlabel}


@grad_maker("sigmoid_cross_entropy_with_logits", emits=("sigmoid", "elementwise_sub", "elementwise_mul", "scale"))
def sigmoid_cross_entropy_grad(g, op):
    """Out = max(x, 0) - x * z + log(1 + exp(-|x|)): dX = (sigmoid(x) - z) * dout, dZ = -x * dout."""
    x, z, dout = op.input("X"), op.input("Label"), op.grad("Out")
    return {"X": g.mul(g.sub(g.sigmoid(x), z), dout), "Label": g.neg(g.mul(x, dout))}


__all__ = ["softmax_grad", "log_softmax_grad", "cross_entropy_grad", "softmax_with_cross_entropy_grad",
           "sigmoid_cross_entropy_grad"]
