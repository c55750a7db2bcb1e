"""Gradients and tangents of unary elementwise ops, each written with ordinary ops so they can be
differentiated again.

Ops whose derivative is a mask (relu, leaky_relu, clip), reads only the output
(tanh, sigmoid) or needs a special function (gelu) use a fused grad op that is
linear in ``Out@GRAD``; its own makers (second order) are at the end of this file.

Each tangent rule, on the line after its maker, reuses the maker's formula: an
elementwise Jacobian is diagonal, so ``J t`` is ``J^T t`` and what the maker
applies to ``dout`` applies to the input's tangent.
"""
from __future__ import annotations

import math

from .families import from_input, from_output, linear, unary
from .base import grad_maker
from .tangent_rules import diagonal, linear_in, slope, tangent_rule, total


def _fused_of_output(grad_type: str):
    """``grad_type(Out, Out@GRAD) -> X@GRAD``: a fused grad op that reads the forward output."""
    return lambda g, x, out, dout: g.op(grad_type, {"Out": out, "Out@GRAD": dout}, outputs="X@GRAD")


def _fused_of_input(grad_type: str):
    """``grad_type(X, Out@GRAD) -> X@GRAD`` with the forward op's attrs: a fused grad op that reads the input."""
    return lambda g, x, out, dout, op: g.op(grad_type, {"X": x, "Out@GRAD": dout}, op.attrs, outputs="X@GRAD")


exp_grad = from_output("exp", emits=("elementwise_mul",), slope=lambda g, out: out)
exp_tangent = slope(exp_grad)
reciprocal_grad = from_output("reciprocal", emits=("square", "scale", "elementwise_mul"),
                              slope=lambda g, out: g.neg(g.square(out)))
reciprocal_tangent = slope(reciprocal_grad)
square_grad = from_input("square", emits=("scale", "elementwise_mul"), slope=lambda g, x: g.scale(x, 2.0))
square_tangent = slope(square_grad)
pow_grad = from_input("pow", emits=("pow", "scale", "elementwise_mul"),
                      slope=lambda g, x, factor: g.scale(g.pow(x, factor - 1.0 if factor else 0.0), factor))
"""factor * x ** (factor - 1); for factor 0 that is 0 * x ** 0 = 0 everywhere, also at x = 0 (not 0 * inf)."""
pow_tangent = slope(pow_grad)
sin_grad = from_input("sin", emits=("cos", "elementwise_mul"), slope=lambda g, x: g.cos(x))
sin_tangent = slope(sin_grad)
cos_grad = from_input("cos", emits=("sin", "scale", "elementwise_mul"), slope=lambda g, x: g.neg(g.sin(x)))
cos_tangent = slope(cos_grad)
abs_grad = from_input("abs", emits=("sign", "elementwise_mul"), slope=lambda g, x: g.sign(x))
abs_tangent = slope(abs_grad)
softplus_grad = from_input("softplus", emits=("sigmoid", "elementwise_mul"), slope=lambda g, x: g.sigmoid(x))
softplus_tangent = slope(softplus_grad)

log_grad = unary("log", emits=("elementwise_div",), rule=lambda g, x, out, dout: g.div(dout, x))
log_tangent = diagonal(log_grad)
sqrt_grad = unary("sqrt", emits=("scale", "elementwise_div"),
                  rule=lambda g, x, out, dout: g.div(dout, g.scale(out, 2.0)))
sqrt_tangent = diagonal(sqrt_grad)
scale_grad = linear("scale", emits=("scale",), transpose=lambda g, dout, scale: g.scale(dout, scale))


@tangent_rule("scale", emits=("scale",))
def scale_tangent(g, op):
    """scale * x + bias moves by scale * dx: the bias drops out."""
    t = op.tangent("X")
    return {"Out": g.scale(t, op.attr("scale"))} if t is not None else {}


sigmoid_grad = unary("sigmoid", emits=("sigmoid_grad",), rule=_fused_of_output("sigmoid_grad"))
sigmoid_tangent = diagonal(sigmoid_grad)
tanh_grad = unary("tanh", emits=("tanh_grad",), rule=_fused_of_output("tanh_grad"))
tanh_tangent = diagonal(tanh_grad)
relu_grad = unary("relu", emits=("relu_grad",), rule=_fused_of_output("relu_grad"))
relu_tangent = diagonal(relu_grad)
leaky_relu_grad = unary("leaky_relu", emits=("leaky_relu_grad",), rule=_fused_of_input("leaky_relu_grad"))
leaky_relu_tangent = diagonal(leaky_relu_grad)
clip_grad = unary("clip", emits=("clip_grad",), rule=_fused_of_input("clip_grad"))
clip_tangent = diagonal(clip_grad)
gelu_grad = unary("gelu", emits=("gelu_grad",), rule=_fused_of_input("gelu_grad"))
gelu_tangent = diagonal(gelu_grad)

INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


# The fused grad ops above are themselves differentiable (second order, forward-over-reverse): each is linear in
# Out@GRAD, and the output-slope and gelu ones also move with the value their slope reads.

masked_grad_grad = linear(
    "relu_grad", "leaky_relu_grad", "clip_grad", slot="Out@GRAD", out="X@GRAD",
    emits=("relu_grad", "leaky_relu_grad", "clip_grad"),
    transpose=lambda g, dd, op: g.op(op.type, {**op.input_slots(), "Out@GRAD": dd}, op.attrs, outputs="X@GRAD"))
"""Self-adjoint masks: the same op applied to the incoming gradient."""
masked_grad_tangent = linear_in("relu_grad", "leaky_relu_grad", "clip_grad", slot="Out@GRAD", out="X@GRAD")


@grad_maker("tanh_grad", "sigmoid_grad", emits=("tanh_grad", "sigmoid_grad", "elementwise_mul", "scale"))
def output_slope_grad_grad(g, op):
    """dX = dOut * f'(Out) with f' = 1 - Out^2 (tanh) or Out (1 - Out) (sigmoid).

    In dOut the map is linear and self-adjoint: the same op on the incoming
    gradient ddX. In Out: ddX * dOut * f''(Out), with f'' = -2 Out or 1 - 2 Out.
    """
    out, dout, dd = op.input("Out"), op.input("Out@GRAD"), op.grad("X@GRAD")
    curvature = g.scale(out, -2.0, 0.0 if op.type == "tanh_grad" else 1.0)
    return {"Out@GRAD": g.op(op.type, {"Out": out, "Out@GRAD": dd}, outputs="X@GRAD"),
            "Out": g.mul(g.mul(dd, dout), curvature)}


@tangent_rule("tanh_grad", "sigmoid_grad", emits=("tanh_grad", "sigmoid_grad", "elementwise_mul", "scale",
                                                  "elementwise_add"))
def output_slope_tangent(g, op):
    """X@GRAD = dOut * f'(Out): the same op on dOut's tangent, plus dOut * f''(Out) * Out's tangent,
    f'' = -2 Out (tanh) or 1 - 2 Out (sigmoid) as functions of Out."""
    out, dout = op.input("Out"), op.input("Out@GRAD")
    t_out, t_dout = op.tangent("Out"), op.tangent("Out@GRAD")
    curvature = t_out and g.scale(out, -2.0, 0.0 if op.type == "tanh_grad" else 1.0)
    return {"X@GRAD": total(g, [t_dout and g.op(op.type, {"Out": out, "Out@GRAD": t_dout}, outputs="X@GRAD"),
                                t_out and g.mul(g.mul(t_out, dout), curvature)])}


@grad_maker("gelu_grad", emits=("gelu_grad", "square", "scale", "exp", "elementwise_mul"))
def gelu_grad_grad(g, op):
    """gelu_grad = dout * (Phi(x) + x phi(x)); its x-derivative is dout * phi(x) * (2 - x^2)."""
    x, dout, dd = op.input("X"), op.input("Out@GRAD"), op.grad("X@GRAD")
    sq = g.square(x)
    slope = g.mul(g.scale(g.exp(g.scale(sq, -0.5)), INV_SQRT_2PI), g.scale(sq, -1.0, 2.0))
    return {"Out@GRAD": g.op("gelu_grad", {"X": x, "Out@GRAD": dd}, outputs="X@GRAD"),
            "X": g.mul(g.mul(slope, dout), dd)}


@tangent_rule("gelu_grad", emits=("gelu_grad", "square", "scale", "exp", "elementwise_mul", "elementwise_add"))
def gelu_grad_tangent(g, op):
    """gelu_grad = dOut * gelu'(x), with gelu''(x) = phi(x) * (2 - x^2)."""
    x, dout, tx, t_dout = op.input("X"), op.input("Out@GRAD"), op.tangent("X"), op.tangent("Out@GRAD")
    through_x = None
    if tx is not None:
        sq = g.square(x)
        curvature = g.mul(g.scale(g.exp(g.scale(sq, -0.5)), INV_SQRT_2PI), g.scale(sq, -1.0, 2.0))
        through_x = g.mul(g.mul(curvature, dout), tx)
    return {"X@GRAD": total(g, [t_dout and g.op("gelu_grad", {"X": x, "Out@GRAD": t_dout}, outputs="X@GRAD"),
                                through_x])}


__all__ = ["exp_grad", "exp_tangent", "reciprocal_grad", "reciprocal_tangent", "square_grad", "square_tangent",
           "pow_grad", "pow_tangent", "sin_grad", "sin_tangent", "cos_grad", "cos_tangent", "abs_grad", "abs_tangent",
           "softplus_grad", "softplus_tangent", "log_grad", "log_tangent", "sqrt_grad", "sqrt_tangent", "scale_grad",
           "scale_tangent", "sigmoid_grad", "sigmoid_tangent", "tanh_grad", "tanh_tangent", "relu_grad",
           "relu_tangent", "leaky_relu_grad", "leaky_relu_tangent", "clip_grad", "clip_tangent", "gelu_grad",
           "gelu_tangent", "INV_SQRT_2PI", "masked_grad_grad", "masked_grad_tangent", "output_slope_grad_grad",
           "output_slope_tangent", "gelu_grad_grad", "gelu_grad_tangent"]
