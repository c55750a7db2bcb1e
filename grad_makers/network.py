"""Gradients of dropout, lookup_table and batch_norm, written with ordinary ops."""
from __future__ import annotations

from .base import grad_maker
from .families import linear

dropout_grad = linear("dropout", emits=("elementwise_mul",),
                      transpose=lambda g, dout, op: g.mul(dout, op.output("Mask")))
"""dX = dOut * Mask: the forward's mask is reused, never resampled."""

lookup_table_grad = linear("lookup_table", emits=("gather_grad",), slot="W", transpose=lambda g, dout, op: g.op(
    "gather_grad", {"X": op.input("W"), "Index": op.input("Ids"), "Out@GRAD": dout}, {"axis": 0}, outputs="X@GRAD"))
"""Rows of dW get the gradients of every lookup of them (repeated ids accumulate)."""


@grad_maker("batch_norm", emits=("unsqueeze", "reduce_mean", "reduce_sum", "elementwise_sub", "elementwise_mul",
                                 "square", "scale", "pow"))
def batch_norm_grad(g, op):
    """Recompute the normalization from X with ordinary ops, then the textbook batch-norm backward.

    Training: dX = scale * rstd * (dY - mean(dY) - xhat * mean(dY * xhat)); inference
    uses the running statistics, so dX = scale * rstd * dY. dScale = sum(dY * xhat),
    dBias = sum(dY), both over every axis but the channel axis 1.
    """
    x, dy, test = op.input("X"), op.grad("Y"), op.attr("is_test")
    axes = [0] + list(range(2, len(op.shape(x))))
    mean = g.unsqueeze(op.input("Mean"), axes) if test else g.reduce_mean(x, axes, keep_dim=True)
    var = g.unsqueeze(op.input("Variance"), axes) if test else \
        g.reduce_mean(g.square(g.sub(x, mean)), axes, keep_dim=True)
    rstd = g.pow(g.scale(var, bias=op.attr("epsilon")), -0.5)
    xhat, gain = g.mul(g.sub(x, mean), rstd), g.mul(g.unsqueeze(op.input("Scale"), axes), rstd)
    dy_xhat = g.mul(dy, xhat)
    centred_dy = dy if test else g.sub(g.sub(dy, g.reduce_mean(dy, axes, keep_dim=True)),
                                       g.mul(xhat, g.reduce_mean(dy_xhat, axes, keep_dim=True)))
    return {"X": g.mul(centred_dy, gain), "Scale": g.reduce_sum(dy_xhat, axes), "Bias": g.reduce_sum(dy, axes)}


__all__ = ["dropout_grad", "lookup_table_grad", "batch_norm_grad"]
