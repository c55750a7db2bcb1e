"""Gradients and tangents of unary elementwise ops, each written with ordinary ops so they can be
differentiated again.

Ops whose derivative is a mask (relu, leaky_relu, clip), reads only the output
(tanh, sigmoid) or needs a special function (gelu) use a fused grad op that is
linear in ``Out@GRAD``; its own maker (in ``grad_ops``) is one line.

Each tangent rule, on the line after its maker, reuses the maker's formula: an
elementwise Jacobian is diagonal, so ``J t`` is ``J^T t`` and what the maker
applies to ``dout`` applies to the input's tangent.
"""
from __future__ import annotations

import math

from .families import from_input, from_output, linear, unary
from .tangent_rules import diagonal, slope, tangent_rule


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

__all__ = ["exp_grad", "exp_tangent", "reciprocal_grad", "reciprocal_tangent", "square_grad", "square_tangent",
           "pow_grad", "pow_tangent", "sin_grad", "sin_tangent", "cos_grad", "cos_tangent", "abs_grad", "abs_tangent",
           "softplus_grad", "softplus_tangent", "log_grad", "log_tangent", "sqrt_grad", "sqrt_tangent", "scale_grad",
           "scale_tangent", "sigmoid_grad", "sigmoid_tangent", "tanh_grad", "tanh_tangent", "relu_grad",
           "relu_tangent", "leaky_relu_grad", "leaky_relu_tangent", "clip_grad", "clip_tangent", "gelu_grad",
           "gelu_tangent", "INV_SQRT_2PI"]
