"""Gradients of reductions: the output gradient broadcast back over the reduced dims."""
from __future__ import annotations

from .families import linear, reduced_axes, reduction


def _mean_grad(g, dout, op, **attrs):
    return g.op("reduce_mean_grad", {"X": op.input("X"), "Out@GRAD": dout}, attrs, outputs="X@GRAD")


reduce_sum_grad = reduction("reduce_sum", emits=("unsqueeze", "broadcast_to"),
                            rule=lambda g, x, out, dout: g.broadcast_to(dout, x))
reduce_mean_grad = linear("reduce_mean", emits=("reduce_mean_grad",),
                          transpose=lambda g, dout, op: _mean_grad(g, dout, op, **op.attrs))
mean_grad = linear("mean", emits=("reduce_mean_grad",),
                   transpose=lambda g, dout, op: _mean_grad(g, dout, op, reduce_all=True))


def _split_among_ties(g, x, out, dout, op):
    """dx = dout * mask / count: the elements equal to the extreme share its gradient evenly (PyTorch's amax,
    JAX), so the gradient sums to dout however many elements tie."""
    mask = g.cast(g.compare("equal", x, out), op.dtype(x))
    return g.mul(g.div(mask, g.reduce_sum(mask, reduced_axes(op), keep_dim=True)), dout)


reduce_extreme_grad = reduction("reduce_max", "reduce_min", rule=_split_among_ties, emits=(
    "unsqueeze", "equal", "cast", "reduce_sum", "elementwise_div", "elementwise_mul"))

__all__ = ["reduce_sum_grad", "reduce_mean_grad", "mean_grad", "reduce_extreme_grad"]
