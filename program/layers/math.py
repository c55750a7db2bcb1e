"""Elementwise arithmetic layers: binary ops with broadcasting, and unary functions."""
from __future__ import annotations

from numbers import Number

from ..errors import ProgramError
from ..variable import Variable
from .creation import as_var
from .helper import append, check_var


def _binary(op_type: str, x, y, name=None) -> Variable:
    if not isinstance(x, Variable) and not isinstance(y, Variable):
        raise ProgramError(f"{op_type} needs at least one Variable, got {type(x).__name__} and {type(y).__name__}")
    x = as_var(x, like=y if isinstance(y, Variable) else None)
    y = as_var(y, like=x)
    return append(op_type, {"X": x, "Y": y}, name=name)


def add(x, y, name=None) -> Variable:
    """x + y with broadcasting; a Python number on either side becomes a ``scale`` op."""
    if isinstance(y, Number) and isinstance(x, Variable):
        return scale(x, 1.0, float(y), name=name)
    if isinstance(x, Number) and isinstance(y, Variable):
        return scale(y, 1.0, float(x), name=name)
    return _binary("elementwise_add", x, y, name)


def subtract(x, y, name=None) -> Variable:
    if isinstance(y, Number) and isinstance(x, Variable):
        return scale(x, 1.0, -float(y), name=name)
    if isinstance(x, Number) and isinstance(y, Variable):
        return scale(y, -1.0, float(x), name=name)
    return _binary("elementwise_sub", x, y, name)


def multiply(x, y, name=None) -> Variable:
    if isinstance(y, Number) and isinstance(x, Variable):
        return scale(x, float(y), name=name)
    if isinstance(x, Number) and isinstance(y, Variable):
        return scale(y, float(x), name=name)
    return _binary("elementwise_mul", x, y, name)


def divide(x, y, name=None) -> Variable:
    if isinstance(y, Number) and isinstance(x, Variable):
        return scale(x, 1.0 / float(y), name=name)
    return _binary("elementwise_div", x, y, name)


def pow(x, y, name=None) -> Variable:
    """x ** y; a number exponent becomes the unary ``pow`` op (``square`` for 2)."""
    if isinstance(y, Number) and isinstance(x, Variable):
        if float(y) == 2.0:
            return square(x, name=name)
        return append("pow", {"X": x}, {"factor": float(y)}, name=name)
    return _binary("elementwise_pow", x, y, name)


def maximum(x, y, name=None) -> Variable:
    return _binary("elementwise_max", x, y, name)


def minimum(x, y, name=None) -> Variable:
    return _binary("elementwise_min", x, y, name)


def scale(x: Variable, scale: float = 1.0, bias: float = 0.0, name=None) -> Variable:
    """x * scale + bias."""
    return append("scale", {"X": check_var(x, "x")}, {"scale": scale, "bias": bias}, name=name)


def clip(x: Variable, min: float, max: float, name=None) -> Variable:
    if min > max:
        raise ProgramError(f"clip: min {min} is greater than max {max}")
    return append("clip", {"X": check_var(x, "x")}, {"min": min, "max": max}, name=name)


def leaky_relu(x: Variable, alpha: float = 0.01, name=None) -> Variable:
    return append("leaky_relu", {"X": check_var(x, "x")}, {"alpha": alpha}, name=name)


def elu(x: Variable, alpha: float = 1.0, name=None) -> Variable:
    """x where x > 0, else alpha * (exp(x) - 1)."""
    return append("elu", {"X": check_var(x, "x")}, {"alpha": alpha}, name=name)


def _unary(op_type: str):
    def layer(x: Variable, name=None) -> Variable:
        return append(op_type, {"X": check_var(x, "x")}, name=name)

    layer.__name__ = op_type
    layer.__doc__ = f"Elementwise {op_type}(x)."
    return layer


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
gelu = _unary("gelu")
softplus = _unary("softplus")
reciprocal = _unary("reciprocal")
sign = _unary("sign")
erf = _unary("erf")
silu = _unary("silu")


__all__ = [
    "add", "subtract", "multiply", "divide", "pow", "maximum", "minimum", "scale", "clip", "leaky_relu", "relu",
    "sigmoid", "tanh", "exp", "log", "sqrt", "square", "abs", "sin", "cos", "gelu", "softplus", "reciprocal", "sign",
    "elu", "erf", "silu"
]
