"""Elementwise arithmetic layers: binary ops with broadcasting, and unary functions.

A Python number beside a Variable follows numpy's and Paddle's promotion, so
the declared dtype is the computed one (``design_docs/ir.md``, "dtype
rules"; ``creation.with_number``): with a float var the number takes the
var's dtype; with an integer var an integer number keeps the integer dtype,
exactly (``t + 1`` is int64 for an int64 ``t``), while a float number, or
true division, first casts the var to float64 (``t * 2.5``, ``t / 2``).
"""
from __future__ import annotations

import math
from numbers import Integral, Number

import numpy as np

from ..dtypes import INT_DTYPES
from ..errors import ProgramError
from ..variable import Variable
from .creation import as_operands, with_number
from .helper import append, check_var
from .naming import named


def _binary(op_type: str, x, y, name=None) -> Variable:
    if not isinstance(x, Variable) and not isinstance(y, Variable):
        raise ProgramError(f"{op_type} needs at least one Variable, got {type(x).__name__} and {type(y).__name__}")
    x, y = as_operands(x, y)
    return append(op_type, {"X": x, "Y": y}, name=name)


@named
def add(x, y, name=None) -> Variable:
    """x + y with broadcasting; a Python number on either side becomes a ``scale`` op."""
    if isinstance(y, Number) and isinstance(x, Variable):
        x, y = with_number(x, y)
        return scale(x, 1 if isinstance(y, int) else 1.0, y, name=name)
    if isinstance(x, Number) and isinstance(y, Variable):
        return add(y, x, name=name)
    return _binary("elementwise_add", x, y, name)


@named
def subtract(x, y, name=None) -> Variable:
    if isinstance(y, Number) and isinstance(x, Variable):
        x, y = with_number(x, y)
        return scale(x, 1 if isinstance(y, int) else 1.0, -y, name=name)
    if isinstance(x, Number) and isinstance(y, Variable):
        y, x = with_number(y, x)
        return scale(y, -1 if isinstance(x, int) else -1.0, x, name=name)
    return _binary("elementwise_sub", x, y, name)


@named
def multiply(x, y, name=None) -> Variable:
    if isinstance(y, Number) and isinstance(x, Variable):
        x, y = with_number(x, y)
        return scale(x, y, 0 if isinstance(y, int) else 0.0, name=name)
    if isinstance(x, Number) and isinstance(y, Variable):
        return multiply(y, x, name=name)
    return _binary("elementwise_mul", x, y, name)


@named
def divide(x, y, name=None) -> Variable:
    """x / y, true division: integers divide to float64, as in Python and numpy."""
    if isinstance(y, Number) and isinstance(x, Variable):
        x, y = with_number(x, y, promote=True)
        return scale(x, 1.0 / y, name=name)
    return _binary("elementwise_div", x, y, name)


@named
def negative(x: Variable, name=None) -> Variable:
    """-x, in x's dtype (exact on integers)."""
    return multiply(check_var(x, "x"), -1, name=name)


@named
def pow(x, y, name=None) -> Variable:
    """x ** y; a number exponent becomes the unary ``pow`` op (``square`` for 2). An integer var keeps its
    dtype under a whole exponent >= 0 (``elementwise_pow``) and is cast to float64 under any other."""
    if isinstance(y, Number) and isinstance(x, Variable):
        if x.dtype in INT_DTYPES and isinstance(y, Integral) and y >= 0 and y != 2:
            return _binary("elementwise_pow", x, int(y), name)
        x, y = with_number(x, y, promote=not (isinstance(y, Integral) and y >= 0))
        if y == 2.0:
            return square(x, name=name)
        return append("pow", {"X": x}, {"factor": y}, name=name)
    return _binary("elementwise_pow", x, y, name)


@named
def maximum(x, y, name=None) -> Variable:
    return _binary("elementwise_max", x, y, name)


@named
def minimum(x, y, name=None) -> Variable:
    return _binary("elementwise_min", x, y, name)


@named
def remainder(x, y, fmod: bool = False, name=None) -> Variable:
    """x mod y: the sign of y (Python's ``%``, the floor quotient's remainder), or with ``fmod`` the sign of x
    (C's fmod, the truncated quotient's)."""
    if not isinstance(x, Variable) and not isinstance(y, Variable):
        raise ProgramError(f"remainder needs at least one Variable, got {type(x).__name__} and {type(y).__name__}")
    x, y = as_operands(x, y)
    return append("elementwise_mod", {"X": x, "Y": y}, {"fmod": bool(fmod)}, name=name)


@named
def scale(x: Variable, scale: float = 1.0, bias: float = 0.0, name=None) -> Variable:
    """x * scale + bias."""
    return append("scale", {"X": check_var(x, "x")}, {"scale": scale, "bias": bias}, name=name)


@named
def clip(x: Variable, min: float, max: float, name=None) -> Variable:
    if min > max:
        raise ProgramError(f"clip: min {min} is greater than max {max}")
    return append("clip", {"X": check_var(x, "x")}, {"min": min, "max": max}, name=name)


@named
def leaky_relu(x: Variable, alpha: float = 0.01, name=None) -> Variable:
    return append("leaky_relu", {"X": check_var(x, "x")}, {"alpha": alpha}, name=name)


@named
def elu(x: Variable, alpha: float = 1.0, name=None) -> Variable:
    """x where x > 0, else alpha * (exp(x) - 1)."""
    return append("elu", {"X": check_var(x, "x")}, {"alpha": alpha}, name=name)


def _unary(op_type: str):
    def layer(x: Variable, name=None) -> Variable:
        return append(op_type, {"X": check_var(x, "x")}, name=name)

    layer.__name__ = op_type
    layer.__doc__ = f"Elementwise {op_type}(x)."
    return named(layer)


relu = _unary("relu")
sigmoid = _unary("sigmoid")
tanh = _unary("tanh")
exp = _unary("exp")
log = _unary("log")
sqrt = _unary("sqrt")
square = _unary("square")
abs = _unary("abs")
sin = _unary("sin")
cos = _unary("cos")
softplus = _unary("softplus")
reciprocal = _unary("reciprocal")
sign = _unary("sign")
erf = _unary("erf")
silu = _unary("silu")


# Activations that are compositions of the ops above, written as such (tinygrad's way): no schema, kernel,
# lowering, grad maker or ONNX export entry of their own; their gradients, first and second order, and their
# export come from the ops they are made of, and the printed backward program names those ops.
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


@named
def mish(x: Variable, name=None) -> Variable:
    """x * tanh(softplus(x)) (Misra 2019; YOLOv4's activation)."""
    return multiply(x, tanh(softplus(x)), name=name)


@named
def hardswish(x: Variable, name=None) -> Variable:
    """x * relu6(x + 3) / 6 (MobileNetV3; PyTorch's ``hardswish``). Its gradient at x = -3 is 0 and at x = 3
    is 1, clip's one-sided rule; PyTorch gives -0.5 and 1.5 there."""
    return multiply(x, scale(clip(scale(x, 1.0, 3.0), 0.0, 6.0), 1.0 / 6.0), name=name)


@named
def selu(x: Variable, alpha: float = SELU_ALPHA, gamma: float = SELU_SCALE, name=None) -> Variable:
    """gamma * elu(x, alpha), with the self-normalizing constants by default (ONNX's ``Selu``, same attrs)."""
    return scale(elu(x, alpha), gamma, name=name)


@named
def logsigmoid(x: Variable, name=None) -> Variable:
    """log(sigmoid(x)) as -softplus(-x): finite and accurate for large |x|."""
    return negative(softplus(negative(x)), name=name)


@named
def gelu(x: Variable, approximate: bool = False, name=None) -> Variable:
    """x * Phi(x), Phi the standard normal CDF (the ``gelu`` op). ``approximate=True`` (Paddle's flag, PyTorch's
    ``approximate="tanh"``) composes the tanh form 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) instead."""
    if not approximate:
        return append("gelu", {"X": check_var(x, "x")}, name=name)
    inner = scale(add(x, scale(multiply(square(x), x), 0.044715)), math.sqrt(2.0 / math.pi))
    return multiply(x, scale(tanh(inner), 0.5, 0.5), name=name)


ONNX_COMPOSITES = {
    "Mish": (mish, {}),
    "HardSwish": (hardswish, {}),
    # ONNX's defaults are the float32 roundings of the constants (PyTorch's and gradgen's are exact).
    "Selu": (selu, {"alpha": ("alpha", float(np.float32(SELU_ALPHA)), float),
                    "gamma": ("gamma", float(np.float32(SELU_SCALE)), float)}),
    "Gelu": (gelu, {"approximate": ("approximate", "none", {"none": False, "tanh": True}.__getitem__)}),
}
"""ONNX operator -> (the layer that composes it, {layer keyword: (ONNX attr, its default, attr -> keyword value)}):
the ONNX import of the activations above (their export is that of the ops they are made of)."""


__all__ = [
    "add", "subtract", "multiply", "divide", "negative", "pow", "maximum", "minimum", "scale", "clip", "leaky_relu",
    "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "square", "abs", "sin", "cos", "gelu", "softplus", "reciprocal",
    "sign", "elu", "erf", "silu", "remainder", "mish", "hardswish", "selu", "logsigmoid", "SELU_ALPHA", "SELU_SCALE", "ONNX_COMPOSITES"
]
