"""Gradients of softmax, log-softmax and the cross-entropy losses, written with ordinary ops."""
from __future__ import annotations

from gradgen.program.shapes import normalize_axis

from .base import grad_maker
from .families import unary


def _axis(op, name: str) -> int:
    return normalize_axis(op.attr("axis"), len(op.shape(name)))


def _softmax_backward(g, out, dout, axis: int):
    """dx = out * (dout - sum(dout * out, axis))."""
    return g.mul(out, g.sub(dout, g.reduce_sum(g.mul(dout, out), [axis], keep_dim=True)))


def _one_hot(g, op, label: str, like: str):
    """Hard int labels (shape [..., 1] or [...]) as a float one-hot tensor shaped like ``like``."""
    like_t = op.var_type(like)
    if len(op.shape(label)) == len(like_t.shape):
        label = g.squeeze(label, [-1])
    return g.one_hot(label, like_t.shape[-1], like_t.dtype)


softmax_grad = unary("softmax", emits=("elementwise_mul", "reduce_sum", "elementwise_sub"),
                     rule=lambda g, x, out, dout, op: _softmax_backward(g, out, dout, _axis(op, out)))
log_softmax_grad = unary("log_softmax", emits=("reduce_sum", "exp", "elementwise_mul", "elementwise_sub"),
                         rule=lambda g, x, out, dout, op: g.sub(dout, g.mul(
                             g.exp(out), g.reduce_sum(dout, [_axis(op, out)], keep_dim=True))))
"""dx = dout - softmax * sum(dout, axis), with softmax = exp(out)."""


@grad_maker("cross_entropy", emits=("squeeze", "one_hot", "elementwise_div", "elementwise_mul", "scale", "log"))
def cross_entropy_grad(g, op):
    """Out = -sum(label * log(X)) over the last axis: dX = -dout * label / X; soft labels get -dout * log(X)."""
    x, label, dout, soft = op.input("X"), op.input("Label"), op.grad("Out"), op.attr("soft_label")
    target = label if soft else _one_hot(g, op, label, x)
    return {"X": g.neg(g.mul(g.div(target, x), dout)), "Label": g.neg(g.mul(g.log(x), dout)) if soft else None}


@grad_maker("softmax_with_cross_entropy", emits=("squeeze", "one_hot", "elementwise_sub", "elementwise_mul",
                                                 "reduce_sum", "elementwise_add", "log_softmax", "scale"))
def softmax_with_cross_entropy_grad(g, op):
    """dLogits = (softmax - label) * dLoss, plus softmax's own backward if its output was used."""
    logits, label, softmax, dloss = op.input("Logits"), op.input("Label"), op.output("Softmax"), op.grad("Loss")
    soft, axis = op.attr("soft_label"), _axis(op, logits)
    # d loss / d logits = softmax * sum(label) - label; hard labels and probability rows sum to 1
    dlogits = g.mul(g.sub(g.mul(softmax, g.reduce_sum(label, [axis], keep_dim=True)), label) if soft
                    else g.sub(softmax, _one_hot(g, op, label, logits)), dloss)
    if op.has_grad("Softmax"):
        dlogits = g.add(dlogits, _softmax_backward(g, softmax, op.grad("Softmax"), axis))
    dlabel = g.neg(g.mul(g.op("log_softmax", {"X": logits}, {"axis": axis}), dloss)) if soft else None
    return {"Logits": dlogits, "Label": dlabel}


@grad_maker("sigmoid_cross_entropy_with_logits", emits=("sigmoid", "elementwise_sub", "elementwise_mul", "scale"))
def sigmoid_cross_entropy_grad(g, op):
    """Out = max(x, 0) - x * z + log(1 + exp(-|x|)): dX = (sigmoid(x) - z) * dout, dZ = -x * dout."""
    x, z, dout = op.input("X"), op.input("Label"), op.grad("Out")
    return {"X": g.mul(g.sub(g.sigmoid(x), z), dout), "Label": g.neg(g.mul(x, dout))}


__all__ = ["softmax_grad", "log_softmax_grad", "cross_entropy_grad", "softmax_with_cross_entropy_grad",
           "sigmoid_cross_entropy_grad"]
