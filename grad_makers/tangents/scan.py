"""Tangents of cumsum, reduce_prod and prod_others: running sums are linear; a product moves by
sum(prod_others(x) * dx), and prod_others by its derivative in the tangent's direction, which the reverse
rule already builds (the product's Hessian is symmetric), exact at zeros."""
from __future__ import annotations

from .. import scan as reverse
from ..tangent_rules import linear_in, tangent_rule
from .reduction import weighted_sum

cumsum_tangent = linear_in("cumsum")


@tangent_rule("reduce_prod", emits=("prod_others", "elementwise_mul", "reduce_sum"))
def reduce_prod_tangent(g, op):
    x, t = op.input("X"), op.tangent("X")
    if t is None:
        return {}
    others = g.op("prod_others", {"X": x}, {"dim": op.attr("dim"), "reduce_all": op.attr("reduce_all")})
    return {"Out": weighted_sum(g, op, t, others)}


@tangent_rule("prod_others", emits=reverse.prod_others_grad.emits)
def prod_others_tangent(g, op):
    t = op.tangent("X")
    return {"Out": reverse.others_product_derivative(g, op, op.input("X"), t)} if t is not None else {}


__all__ = ["cumsum_tangent", "reduce_prod_tangent", "prod_others_tangent"]
