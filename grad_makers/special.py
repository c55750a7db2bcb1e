"""Gradients and tangents of erf, silu, elu and logsumexp: smooth functions people reach for, written with
ordinary ops.

elu's derivative is a mask (1 for x > 0, alpha * exp(x) below), so it has a
fused ``elu_grad`` op, linear in ``Out@GRAD``; its own maker differentiates
the mask's exponential part as ``elu_grad - relu_grad`` (alpha * exp(x) where
x <= 0, else 0), so every order stays exact away from the kink.
"""
from __future__ import annotations

import math

from .base import grad_maker
from .families import from_input, kept, reduction, unary
from .reduction import weighted_sum
from .tangent_rules import diagonal, slope, tangent_rule, total

TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

erf_grad = from_input("erf", emits=("square", "scale", "exp", "elementwise_mul"),
                      slope=lambda g, x: g.scale(g.exp(g.scale(g.square(x), -1.0)), TWO_OVER_SQRT_PI))
"""erf'(x) = 2 / sqrt(pi) * exp(-x^2)."""
erf_tangent = slope(erf_grad)

silu_grad = from_input("silu", emits=("sigmoid", "scale", "elementwise_mul"),
                       slope=lambda g, x: _silu_slope(g, x, g.sigmoid(x)))
"""silu(x) = x s(x), s = sigmoid: silu'(x) = s (1 + x (1 - s))."""
silu_tangent = slope(silu_grad)


def _silu_slope(g, x, s):
    return g.mul(s, g.scale(g.mul(x, g.scale(s, -1.0, 1.0)), 1.0, 1.0))


def _elu_grad(g, x, dout, alpha: float):
    return g.op("elu_grad", {"X": x, "Out@GRAD": dout}, {"alpha": alpha}, outputs="X@GRAD")


elu_grad = unary("elu", emits=("elu_grad",), rule=lambda g, x, out, dout, alpha: _elu_grad(g, x, dout, alpha))
elu_tangent = diagonal(elu_grad)


def elu_mask_slope(g, x, w, alpha: float):
    """w * m'(x) for elu's mask m = 1 (x > 0) or alpha exp(x): m'(x) = m(x) - [x > 0] (relu_grad reads x as
    its mask). Shared with forward mode, whose tangent of elu_grad moves with x by this term."""
    return g.sub(_elu_grad(g, x, w, alpha), g.op("relu_grad", {"Out": x, "Out@GRAD": w}, outputs="X@GRAD"))


@grad_maker("elu_grad", emits=("elu_grad", "relu_grad", "elementwise_mul", "elementwise_sub"))
def elu_grad_grad(g, op):
    """X@GRAD = dout * m(x), m = 1 (x > 0) or alpha exp(x): linear in dout (the same op on ddX); in x,
    ddX * dout * m'(x)."""
    x, dout, dd, alpha = op.input("X"), op.input("Out@GRAD"), op.grad("X@GRAD"), op.attr("alpha")
    return {"Out@GRAD": _elu_grad(g, x, dd, alpha), "X": elu_mask_slope(g, x, g.mul(dd, dout), alpha)}


@tangent_rule("elu_grad", emits=("elu_grad", "relu_grad", "elementwise_mul", "elementwise_sub", "elementwise_add"))
def elu_grad_tangent(g, op):
    """X@GRAD = dOut * m(x): the same op on dOut's tangent, plus dOut * m'(x) * x's tangent."""
    x, dout, alpha = op.input("X"), op.input("Out@GRAD"), op.attr("alpha")
    tx, t_dout = op.tangent("X"), op.tangent("Out@GRAD")
    return {"X@GRAD": total(g, [t_dout and _elu_grad(g, x, t_dout, alpha),
                                tx and elu_mask_slope(g, x, g.mul(tx, dout), alpha)])}


logsumexp_grad = reduction("logsumexp", emits=("unsqueeze", "elementwise_sub", "exp", "elementwise_mul"),
                           rule=lambda g, x, out, dout: g.mul(dout, g.exp(g.sub(x, out))))
"""d logsumexp / dx = softmax(x) = exp(x - out) over the reduced dims."""


@tangent_rule("logsumexp", emits=("unsqueeze", "elementwise_sub", "exp", "elementwise_mul", "reduce_sum"))
def logsumexp_tangent(g, op):
    """d logsumexp(x) = sum(softmax(x) * dx) over the reduced dims, softmax(x) = exp(x - out)."""
    x, t = op.input("X"), op.tangent("X")
    if t is None:
        return {}
    return {"Out": weighted_sum(g, op, t, g.exp(g.sub(x, kept(g, op, op.output("Out")))))}


__all__ = ["erf_grad", "erf_tangent", "silu_grad", "silu_tangent", "elu_grad", "elu_tangent", "elu_grad_grad",
           "elu_grad_tangent", "elu_mask_slope", "logsumexp_grad", "logsumexp_tangent", "TWO_OVER_SQRT_PI"]
