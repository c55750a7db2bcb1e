"""Gradients of reductions: the output gradient broadcast back over the reduced dims."""
from __future__ import annotations

from .families import linear, reduction


def _mean_grad(g, dout, op, **attrs):
    return g.op("reduce_mean_grad", {"X": op.input("X"), "Out@GRAD": dout}, attrs, outputs="X@GRAD")


reduce_sum_grad = reduction("reduce_sum", emits=("unsqueeze", "broadcast_to"),
                            rule=lambda g, x, out, dout: g.broadcast_to(dout, x))
reduce_mean_grad = linear("reduce_mean", emits=("reduce_mean_grad",),
                          transpose=lambda g, dout, op: _mean_grad(g, dout, op, **op.attrs))
mean_grad = linear("mean", emits=("reduce_mean_grad",),
                   transpose=lambda g, dout, op: _mean_grad(g, dout, op, reduce_all=True))
reduce_extreme_grad = reduction(
    "reduce_max", "reduce_min", emits=("unsqueeze", "equal", "cast", "elementwise_mul"),
    rule=lambda g, x, out, dout, op: g.mul(g.cast(g.compare("equal", x, out), op.dtype(x)), dout))
"""The gradient flows to every element equal to the extreme (ties all receive it, as in Paddle)."""

__all__ = ["reduce_sum_grad", "reduce_mean_grad", "mean_grad", "reduce_extreme_grad"]
