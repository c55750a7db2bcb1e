"""Gradients of reductions: the output gradient broadcast back over the reduced dims.

Their tangents: sums and means are linear (the op itself on the tangent); the
others move by the tangent weighted with their slope and summed over the
reduced dims. max and min share each extreme's slope evenly among the elements
that tie for it, as the reverse rule splits the gradient.
"""
from __future__ import annotations

from .families import kept, linear, reduced_axes, reduction
from .tangent_rules import linear_in, tangent_rule


def _mean_grad(g, dout, op, **attrs):
    return g.op("reduce_mean_grad", {"X": op.input("X"), "Out@GRAD": dout}, attrs, outputs="X@GRAD")


reduce_sum_grad = reduction("reduce_sum", emits=("unsqueeze", "broadcast_to"),
                            rule=lambda g, x, out, dout: g.broadcast_to(dout, x))
reduce_mean_grad = linear("reduce_mean", emits=("reduce_mean_grad",),
                          transpose=lambda g, dout, op: _mean_grad(g, dout, op, **op.attrs))
mean_grad = linear("mean", emits=("reduce_mean_grad",),
                   transpose=lambda g, dout, op: _mean_grad(g, dout, op, reduce_all=True))
sum_like_tangent = linear_in("reduce_sum", "reduce_mean", "mean")


def weighted_sum(g, op, t, weight):
    """sum(weight * t) over the reduced dims of ``op`` (a ``reduce_*`` op), kept as the op keeps them:
    the tangent of a reduction whose slope in each element is ``weight`` (shaped like X)."""
    return g.reduce_sum(g.mul(t, weight), reduced_axes(op), keep_dim=op.attr("keep_dim"))


def tie_shares(g, x, extreme, op, amount):
    """``amount / count`` at the elements of ``x`` equal to ``extreme`` (``count`` of them in their slice) and
    ``amount / count * 0`` elsewhere: 0, or NaN throughout a slice where none is equal (a NaN extreme: 0 / 0).
    A select, not a product with the 0/1 mask, which XLA rewrites to 0 where the quotient is not finite."""
    hit = g.compare("equal", x, extreme)
    share = g.div(amount, g.reduce_sum(g.cast(hit, op.dtype(x)), reduced_axes(op), keep_dim=True))
    return g.where(hit, share, g.scale(share, 0.0))


def _split_among_ties(g, x, out, dout, op):
    """dx = dout / count at the elements equal to the extreme: they share its gradient evenly (PyTorch's amax,
    JAX), so the gradient sums to dout however many elements tie."""
    return tie_shares(g, x, out, op, dout)


_TIE_OPS = ("unsqueeze", "equal", "cast", "reduce_sum", "elementwise_div", "scale", "where")

reduce_extreme_grad = reduction("reduce_max", "reduce_min", rule=_split_among_ties, emits=_TIE_OPS)


@tangent_rule("reduce_max", "reduce_min", emits=(*_TIE_OPS, "fill_any_like", "elementwise_mul"))
def reduce_extreme_tangent(g, op):
    """d out = sum(t * hit / count(hit)): with k elements tied for the extreme, it moves by their mean tangent."""
    x, t = op.input("X"), op.tangent("X")
    if t is None:
        return {}
    out = kept(g, op, op.output("Out"))
    return {"Out": weighted_sum(g, op, t, tie_shares(g, x, out, op, g.op("fill_any_like", {"X": out},
                                                                            {"value": 1.0})))}


__all__ = ["reduce_sum_grad", "reduce_mean_grad", "mean_grad", "sum_like_tangent", "weighted_sum", "tie_shares",
           "reduce_extreme_grad", "reduce_extreme_tangent"]
