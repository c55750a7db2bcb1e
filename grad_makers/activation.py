"""Gradients of unary elementwise ops, each written with ordinary ops so they can be differentiated again.

Ops whose derivative is a mask (relu, leaky_relu, clip), reads only the output
(tanh, sigmoid) or needs a special function (gelu) use a fused grad op that is
linear in ``Out@GRAD``; its own maker (in ``grad_ops``) is one line.
"""
from __future__ import annotations

import math

from .families import from_input, from_output, linear, unary


def _fused_of_output(grad_type: str):
    """``grad_type(Out, Out@GRAD) -> X@GRAD``: a fused grad op that reads the forward output."""
    return lambda g, x, out, dout: g.op(grad_type, {"Out": out, "Out@GRAD": dout}, outputs="X@GRAD")


def _fused_of_input(grad_type: str):
    """``grad_type(X, Out@GRAD) -> X@GRAD`` with the forward op's attrs: a fused grad op that reads the input."""
    return lambda g, x, out, dout, op: g.op(grad_type, {"X": x, "Out@GRAD": dout}, op.attrs, outputs="X@GRAD")


exp_grad = from_output("exp", emits=("elementwise_mul",), slope=lambda g, out: out)
reciprocal_grad = from_output("reciprocal", emits=("square", "scale", "elementwise_mul"),
                              slope=lambda g, out: g.neg(g.square(out)))
square_grad = from_input("square", emits=("scale", "elementwise_mul"), slope=lambda g, x: g.scale(x, 2.0))
pow_grad = from_input("pow", emits=("pow", "scale", "elementwise_mul"),
                      slope=lambda g, x, factor: g.scale(g.pow(x, factor - 1.0 if factor else 0.0), factor))
"""factor * x ** (factor - 1); for factor 0 that is 0 * x ** 0 = 0 everywhere, also at x = 0 (not 0 * inf)."""
sin_grad = from_input("sin", emits=("cos", "elementwise_mul"), slope=lambda g, x: g.cos(x))
cos_grad = from_input("cos", emits=("sin", "scale", "elementwise_mul"), slope=lambda g, x: g.neg(g.sin(x)))
abs_grad = from_input("abs", emits=("sign", "elementwise_mul"), slope=lambda g, x: g.sign(x))
softplus_grad = from_input("softplus", emits=("sigmoid", "elementwise_mul"), slope=lambda g, x: g.sigmoid(x))

log_grad = unary("log", emits=("elementwise_div",), rule=lambda g, x, out, dout: g.div(dout, x))
sqrt_grad = unary("sqrt", emits=("scale", "elementwise_div"),
                  rule=lambda g, x, out, dout: g.div(dout, g.scale(out, 2.0)))
scale_grad = linear("scale", emits=("scale",), transpose=lambda g, dout, scale: g.scale(dout, scale))

sigmoid_grad = unary("sigmoid", emits=("sigmoid_grad",), rule=_fused_of_output("sigmoid_grad"))
tanh_grad = unary("tanh", emits=("tanh_grad",), rule=_fused_of_output("tanh_grad"))
relu_grad = unary("relu", emits=("relu_grad",), rule=_fused_of_output("relu_grad"))
leaky_relu_grad = unary("leaky_relu", emits=("leaky_relu_grad",), rule=_fused_of_input("leaky_relu_grad"))
clip_grad = unary("clip", emits=("clip_grad",), rule=_fused_of_input("clip_grad"))
gelu_grad = unary("gelu", emits=("gelu_grad",), rule=_fused_of_input("gelu_grad"))

INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)

__all__ = ["exp_grad", "reciprocal_grad", "square_grad", "pow_grad", "sin_grad", "cos_grad", "abs_grad",
           "softplus_grad", "log_grad", "sqrt_grad", "scale_grad", "sigmoid_grad", "tanh_grad", "relu_grad",
           "leaky_relu_grad",
           "clip_grad", "gelu_grad", "INV_SQRT_2PI"]
