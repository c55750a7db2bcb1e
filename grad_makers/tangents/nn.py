"""Tangents of softmax, log-softmax, the losses, dropout, lookup_table and batch_norm."""
from __future__ import annotations

from gradgen.program.shapes import normalize_axis

from .. import nn as reverse
from .base import linear_in, tangent_rule, total


def _axis(op, name: str) -> int:
    return normalize_axis(op.attr("axis"), len(op.shape(name)))


@tangent_rule("softmax", emits=reverse.softmax_grad.emits)
def softmax_tangent(g, op):
    """softmax's Jacobian diag(s) - s s^T is symmetric: the reverse formula on the tangent."""
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


@tangent_rule("batch_norm", emits=("unsqueeze", "reduce_mean", "elementwise_sub", "elementwise_mul", "square",
                                   "scale", "pow", "elementwise_add", "broadcast_to"))
def batch_norm_tangent(g, op):
    """Y = scale * xhat + bias. Training: dxhat = rstd * (dX - mean(dX) - xhat * mean(xhat * dX)), the
    statistics moving with X; inference: dxhat = rstd * dX. The running statistics get no tangent."""
    x, tx, test = op.input("X"), op.tangent("X"), op.attr("is_test")
    ts, tb = op.tangent("Scale"), op.tangent("Bias")
    if tx is None and ts is None and tb is None:
        return {}
    axes = [0] + list(range(2, len(op.shape(x))))
    mean = g.unsqueeze(op.input("Mean"), axes) if test else g.reduce_mean(x, axes, keep_dim=True)
    var = g.unsqueeze(op.input("Variance"), axes) if test else \
        g.reduce_mean(g.square(g.sub(x, mean)), axes, keep_dim=True)
    rstd = g.pow(g.scale(var, bias=op.attr("epsilon")), -0.5)
    xhat = g.mul(g.sub(x, mean), rstd)
    through_x = None
    if tx is not None:
        centred = tx if test else g.sub(g.sub(tx, g.reduce_mean(tx, axes, keep_dim=True)),
                                        g.mul(xhat, g.reduce_mean(g.mul(xhat, tx), axes, keep_dim=True)))
        through_x = g.mul(centred, g.mul(g.unsqueeze(op.input("Scale"), axes), rstd))
    through_scale = ts and g.mul(xhat, g.unsqueeze(ts, axes))
    through_bias = tb and g.unsqueeze(tb, axes)
    if through_x is None and through_scale is None:  # the bias alone: spread over every position
        through_bias = g.broadcast_to(through_bias, op.output("Y"))
    return {"Y": total(g, [through_x, through_scale, through_bias])}


__all__ = ["softmax_tangent", "log_softmax_tangent", "cross_entropy_tangent", "softmax_with_cross_entropy_tangent",
           "sigmoid_cross_entropy_tangent", "dropout_tangent", "lookup_table_tangent", "batch_norm_tangent"]
