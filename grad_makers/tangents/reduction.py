"""Tangents of reductions: sums and means are linear (the op itself on the tangent); max and min move with
every element equal to the extreme, as the reverse rule sends the gradient to every tie."""
from __future__ import annotations

from ..families import kept, reduced_axes
from .base import linear_in, tangent_rule

sum_like_tangent = linear_in("reduce_sum", "reduce_mean", "mean")


@tangent_rule("reduce_max", "reduce_min", emits=("unsqueeze", "equal", "cast", "elementwise_mul", "reduce_sum"))
def reduce_extreme_tangent(g, op):
    x, t = op.input("X"), op.tangent("X")
    if t is None:
        return {}
    hit = g.cast(g.compare("equal", x, kept(g, op, op.output("Out"))), op.dtype(x))
    return {"Out": g.reduce_sum(g.mul(t, hit), reduced_axes(op), keep_dim=op.attr("keep_dim"))}


__all__ = ["sum_like_tangent", "reduce_extreme_tangent"]
