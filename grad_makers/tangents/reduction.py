"""Tangents of reductions: sums and means are linear (the op itself on the tangent); the others move by the
tangent weighted with their slope and summed over the reduced dims. max and min share each extreme's slope
evenly among the elements that tie for it, as the reverse rule splits the gradient."""
from __future__ import annotations

from ..families import kept, reduced_axes
from ..tangent_rules import linear_in, tangent_rule

sum_like_tangent = linear_in("reduce_sum", "reduce_mean", "mean")


def weighted_sum(g, op, t, weight):
    """sum(weight * t) over the reduced dims of ``op`` (a ``reduce_*`` op), kept as the op keeps them:
    the tangent of a reduction whose slope in each element is ``weight`` (shaped like X)."""
    return g.reduce_sum(g.mul(t, weight), reduced_axes(op), keep_dim=op.attr("keep_dim"))


@tangent_rule("reduce_max", "reduce_min", emits=("unsqueeze", "equal", "cast", "reduce_sum", "elementwise_div",
                                                 "elementwise_mul"))
def reduce_extreme_tangent(g, op):
    """d out = sum(t * hit / count(hit)): with k elements tied for the extreme, it moves by their mean tangent."""
    x, t = op.input("X"), op.tangent("X")
    if t is None:
        return {}
    hit = g.cast(g.compare("equal", x, kept(g, op, op.output("Out"))), op.dtype(x))
    return {"Out": weighted_sum(g, op, t, g.div(hit, g.reduce_sum(hit, reduced_axes(op), keep_dim=True)))}


__all__ = ["sum_like_tangent", "weighted_sum", "reduce_extreme_tangent"]
