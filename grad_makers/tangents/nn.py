"""Tangents of softmax, log-softmax, the losses, dropout and lookup_table (batch_norm's: ``normalization``)."""
from __future__ import annotations

from gradgen.program.shapes import normalize_axis

from .. import nn as reverse
from ..tangent_rules import linear_in, tangent_rule, total


def _axis(op, name: str) -> int:
    return normalize_axis(op.attr("axis"), len(op.shape(name)))


@tangent_rule("softmax", emits=reverse.softmax_grad.emits)
def softmax_tangent(g, op):
    """softmax's Jacobian diag(s) - s s^T is symmetric: the reverse rule (softmax_grad) on the tangent."""
    t, out = op.tangent("X"), op.output("Out")
    return {"Out": reverse.softmax_grad.rule(g, op.input("X"), out, t, op)} if t is not None else {}


@tangent_rule("log_softmax", emits=("exp", "elementwise_mul", "reduce_sum", "elementwise_sub"))
def log_softmax_tangent(g, op):
    """d(x - logsumexp(x)) = dx - sum(softmax * dx) along the axis."""
    t, out = op.tangent("X"), op.output("Out")
    if t is None:
        return {}
    return {"Out": g.sub(t, g.reduce_sum(g.mul(g.exp(out), t), [_axis(op, out)], keep_dim=True))}


def _hard_labels(g, op, label: str, like: str, axis: int, inner):
    """``inner`` (the loss's tangent before the sum over the classes) for hard int labels: summed over ``axis``
    and zeroed on the rows of ``ignore_index``, as the reverse rule zeroes their gradient."""
    summed = g.reduce_sum(inner, [axis], keep_dim=True)
    return g.mul(summed, reverse._kept(g, op, label, like, axis))


@tangent_rule("cross_entropy", emits=reverse._HARD_LABELS + ("elementwise_div", "elementwise_mul", "reduce_sum",
                                                              "scale", "log", "elementwise_add"))
def cross_entropy_tangent(g, op):
    """Out = -sum(label * log(X)) over the last axis: dOut = -sum(label * dX / X + dLabel * log(X))."""
    x, label, soft = op.input("X"), op.input("Label"), op.attr("soft_label")
    tx, tl = op.tangent("X"), op.tangent("Label") if soft else None
    axis = len(op.shape(x)) - 1
    if not soft:
        return {"Out": tx and g.neg(_hard_labels(g, op, label, x, axis,
                                                 g.mul(reverse._one_hot(g, op, label, x, axis), g.div(tx, x))))}
    inner = total(g, [tx and g.mul(label, g.div(tx, x)), tl and g.mul(tl, g.log(x))])
    return {"Out": inner and g.neg(g.reduce_sum(inner, [axis], keep_dim=True))}


@tangent_rule("softmax_with_cross_entropy", emits=reverse._HARD_LABELS + (
    "elementwise_sub", "elementwise_mul", "reduce_sum", "elementwise_add", "log_softmax", "scale"))
def softmax_with_cross_entropy_tangent(g, op):
    """dLoss = sum((softmax * sum(label) - label) * dLogits) - sum(dLabel * log_softmax(logits)) (hard labels:
    label one-hot, ignored rows 0); dSoftmax as softmax's."""
    logits, label, softmax = op.input("Logits"), op.input("Label"), op.output("Softmax")
    soft, axis = op.attr("soft_label"), _axis(op, logits)
    tx, tl = op.tangent("Logits"), op.tangent("Label") if soft else None
    moved = tx and g.mul(softmax, g.sub(tx, g.reduce_sum(g.mul(tx, softmax), [axis], keep_dim=True)))
    if not soft:
        slope = g.sub(softmax, reverse._one_hot(g, op, label, logits, axis))
        return {"Loss": tx and _hard_labels(g, op, label, logits, axis, g.mul(slope, tx)), "Softmax": moved}
    # d loss / d logits = softmax * sum(label) - label (soft labels need not sum to 1)
    slope = g.sub(g.mul(softmax, g.reduce_sum(label, [axis], keep_dim=True)), label)
    through_logits = tx and g.mul(slope, tx)
    through_label = tl and g.neg(g.mul(tl, g.op("log_softmax", {"X": logits}, {"axis": axis})))
    inner = total(g, [through_logits, through_label])
    return {"Loss": inner and g.reduce_sum(inner, [axis], keep_dim=True), "Softmax": moved}


@tangent_rule("sigmoid_cross_entropy_with_logits", emits=("sigmoid", "elementwise_sub", "elementwise_mul", "scale",
                                                          "elementwise_add"))
def sigmoid_cross_entropy_tangent(g, op):
    """dOut = (sigmoid(x) - z) * dx - x * dz."""
    x, z, tx, tz = op.input("X"), op.input("Label"), op.tangent("X"), op.tangent("Label")
    return {"Out": total(g, [tx and g.mul(g.sub(g.sigmoid(x), z), tx), tz and g.neg(g.mul(x, tz))])}


@tangent_rule("dropout", emits=("elementwise_mul",))
def dropout_tangent(g, op):
    """dOut = dX * Mask: the forward's mask, never resampled; the mask itself has no tangent."""
    t = op.tangent("X")
    return {"Out": g.mul(t, op.output("Mask"))} if t is not None else {}


lookup_table_tangent = linear_in("lookup_table", slot="W")


__all__ = ["softmax_tangent", "log_softmax_tangent", "cross_entropy_tangent", "softmax_with_cross_entropy_tangent",
           "sigmoid_cross_entropy_tangent", "dropout_tangent", "lookup_table_tangent"]
