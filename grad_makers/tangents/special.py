"""Tangents of erf, silu, elu (and its fused grad op) and logsumexp, from the reverse rules' formulas."""
from __future__ import annotations

from .. import special as reverse
from ..families import kept
from ..tangent_rules import diagonal, slope, tangent_rule, total
from .reduction import weighted_sum

erf_tangent = slope(reverse.erf_grad)
silu_tangent = slope(reverse.silu_grad)
elu_tangent = diagonal(reverse.elu_grad)


@tangent_rule("elu_grad", emits=("elu_grad", "relu_grad", "elementwise_mul", "elementwise_sub", "elementwise_add"))
def elu_grad_tangent(g, op):
    """X@GRAD = dOut * m(x): the same op on dOut's tangent, plus dOut * m'(x) * x's tangent."""
    x, dout, alpha = op.input("X"), op.input("Out@GRAD"), op.attr("alpha")
    tx, t_dout = op.tangent("X"), op.tangent("Out@GRAD")
    return {"X@GRAD": total(g, [t_dout and g.op("elu_grad", {"X": x, "Out@GRAD": t_dout}, op.attrs,
                                                outputs="X@GRAD"),
                                tx and reverse.elu_mask_slope(g, x, g.mul(tx, dout), alpha)])}


@tangent_rule("logsumexp", emits=("unsqueeze", "elementwise_sub", "exp", "elementwise_mul", "reduce_sum"))
def logsumexp_tangent(g, op):
    """d logsumexp(x) = sum(softmax(x) * dx) over the reduced dims, softmax(x) = exp(x - out)."""
    x, t = op.input("X"), op.tangent("X")
    if t is None:
        return {}
    return {"Out": weighted_sum(g, op, t, g.exp(g.sub(x, kept(g, op, op.output("Out")))))}


__all__ = ["erf_tangent", "silu_tangent", "elu_tangent", "elu_grad_tangent", "logsumexp_tangent"]
