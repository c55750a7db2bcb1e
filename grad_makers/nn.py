"""Gradients and tangents of softmax, log-softmax and the cross-entropy losses, written with ordinary ops."""
from __future__ import annotations

from gradgen.program.shapes import normalize_axis

from .base import grad_maker
from .families import unary
from .tangent_rules import tangent_rule, total


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


@tangent_rule("softmax", emits=softmax_grad.emits)
def softmax_tangent(g, op):
    """softmax's Jacobian diag(s) - s s^T is symmetric: the reverse rule (softmax_grad) on the tangent."""
    t, out = op.tangent("X"), op.output("Out")
    return {"Out": softmax_grad.rule(g, op.input("X"), out, t, op)} if t is not None else {}


log_softmax_grad = unary("log_softmax", emits=("reduce_sum", "exp", "elementwise_mul", "elementwise_sub"),
                         rule=lambda g, x, out, dout, op: g.sub(dout, g.mul(
                             g.exp(out), g.reduce_sum(dout, [_axis(op, out)], keep_dim=True))))
"""dx = dout - softmax * sum(dout, axis), with softmax = exp(out)."""


@tangent_rule("log_softmax", emits=("exp", "elementwise_mul", "reduce_sum", "elementwise_sub"))
def log_softmax_tangent(g, op):
    """d(x - logsumexp(x)) = dx - sum(softmax * dx) along the axis."""
    t, out = op.tangent("X"), op.output("Out")
    if t is None:
        return {}
    return {"Out": g.sub(t, g.reduce_sum(g.mul(g.exp(out), t), [_axis(op, out)], keep_dim=True))}


_HARD_LABELS = ("squeeze", "one_hot", "transpose", "fill_any_like", "not_equal", "cast", "unsqueeze")
"""What turning hard labels into a one-hot target and a mask of kept rows records."""


def _hard_label_tangent(g, op, label: str, like: str, axis: int, inner):
    """``inner`` (the loss's tangent before the sum over the classes) for hard int labels: summed over ``axis``
    and zeroed on the rows of ``ignore_index``, as the reverse rule zeroes their gradient."""
    summed = g.reduce_sum(inner, [axis], keep_dim=True)
    return g.mul(summed, _kept(g, op, label, like, axis))


@grad_maker("cross_entropy", emits=_HARD_LABELS + ("elementwise_div", "elementwise_mul", "scale", "log"))
def cross_entropy_grad(g, op):
    """Out = -sum(label * log(X)) over the last axis: dX = -dout * label / X (0 on rows of ``ignore_index``);
    soft labels get dLabel = -dout * log(X)."""
    x, label, dout = op.input("X"), op.input("Label"), op.grad("Out")
    if op.attr("soft_label"):
        return {"X": g.neg(g.mul(g.div(label, x), dout)), "Label": g.neg(g.mul(g.log(x), dout))}
    target, dout = _hard_label_grad(g, op, label, x, len(op.shape(x)) - 1, dout)
    return {"X": g.neg(g.mul(g.div(target, x), dout)), "Label": None}


@tangent_rule("cross_entropy", emits=_HARD_LABELS + ("elementwise_div", "elementwise_mul", "reduce_sum", "scale", "log",
                                                     "elementwise_add"))
def cross_entropy_tangent(g, op):
    """Out = -sum(label * log(X)) over the last axis: dOut = -sum(label * dX / X + dLabel * log(X))."""
    x, label, soft = op.input("X"), op.input("Label"), op.attr("soft_label")
    tx, tl = op.tangent("X"), op.tangent("Label") if soft else None
    axis = len(op.shape(x)) - 1
    if not soft:
        return {"Out": tx and g.neg(_hard_label_tangent(g, op, label, x, axis,
                                                        g.mul(_one_hot(g, op, label, x, axis), g.div(tx, x))))}
    inner = total(g, [tx and g.mul(label, g.div(tx, x)), tl and g.mul(tl, g.log(x))])
    return {"Out": inner and g.neg(g.reduce_sum(inner, [axis], keep_dim=True))}


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


@tangent_rule("softmax_with_cross_entropy", emits=_HARD_LABELS + (
    "elementwise_sub", "elementwise_mul", "reduce_sum", "elementwise_add", "log_softmax", "scale"))
def softmax_with_cross_entropy_tangent(g, op):
    """dLoss = sum((softmax * sum(label) - label) * dLogits) - sum(dLabel * log_softmax(logits)) (hard labels:
    label one-hot, ignored rows 0); dSoftmax as softmax's."""
    logits, label, softmax = op.input("Logits"), op.input("Label"), op.output("Softmax")
    soft, axis = op.attr("soft_label"), _axis(op, logits)
    tx, tl = op.tangent("Logits"), op.tangent("Label") if soft else None
    moved = tx and g.mul(softmax, g.sub(tx, g.reduce_sum(g.mul(tx, softmax), [axis], keep_dim=True)))
    if not soft:
        slope = g.sub(softmax, _one_hot(g, op, label, logits, axis))
        return {"Loss": tx and _hard_label_tangent(g, op, label, logits, axis, g.mul(slope, tx)), "Softmax": moved}
    # d loss / d logits = softmax * sum(label) - label (soft labels need not sum to 1)
    slope = g.sub(g.mul(softmax, g.reduce_sum(label, [axis], keep_dim=True)), label)
    through_logits = tx and g.mul(slope, tx)
    through_label = tl and g.neg(g.mul(tl, g.op("log_softmax", {"X": logits}, {"axis": axis})))
    inner = total(g, [through_logits, through_label])
    return {"Loss": inner and g.reduce_sum(inner, [axis], keep_dim=True), "Softmax": moved}


@grad_maker("sigmoid_cross_entropy_with_logits", emits=("sigmoid", "elementwise_sub", "elementwise_mul", "scale"))
def sigmoid_cross_entropy_grad(g, op):
    """Out = max(x, 0) - x * z + log(1 + exp(-|x|)): dX = (sigmoid(x) - z) * dout, dZ = -x * dout."""
    x, z, dout = op.input("X"), op.input("Label"), op.grad("Out")
    return {"X": g.mul(g.sub(g.sigmoid(x), z), dout), "Label": g.neg(g.mul(x, dout))}


@tangent_rule("sigmoid_cross_entropy_with_logits", emits=("sigmoid", "elementwise_sub", "elementwise_mul", "scale",
                                                          "elementwise_add"))
def sigmoid_cross_entropy_tangent(g, op):
    """dOut = (sigmoid(x) - z) * dx - x * dz."""
    x, z, tx, tz = op.input("X"), op.input("Label"), op.tangent("X"), op.tangent("Label")
    return {"Out": total(g, [tx and g.mul(g.sub(g.sigmoid(x), z), tx), tz and g.neg(g.mul(x, tz))])}


__all__ = ["softmax_grad", "softmax_tangent", "log_softmax_grad", "log_softmax_tangent", "cross_entropy_grad",
           "cross_entropy_tangent", "softmax_with_cross_entropy_grad", "softmax_with_cross_entropy_tangent",
           "sigmoid_cross_entropy_grad", "sigmoid_cross_entropy_tangent"]
