"""Binary elementwise ops with numpy broadcasting.

X and Y share one dtype (cast one first). Out has it too, but for
``elementwise_div`` of integers: that is true division, as Python's ``/``
and numpy's, so Out is float64.
"""
from __future__ import annotations

from ..dtypes import DTYPES, INT_DTYPES, NUMERIC_DTYPES
from ..schema import Attr, TensorType, schema, xp_function
from ..shapes import broadcast_shapes


def _broadcast(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    return {"Out": TensorType(broadcast_shapes(x.shape, y.shape), x.dtype)}


def _true_divide(ctx):
    out = _broadcast(ctx)["Out"]
    return {"Out": TensorType(out.shape, "float64" if out.dtype in INT_DTYPES else out.dtype)}


ELEMENTWISE_TYPES = ("elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div",
                     "elementwise_pow", "elementwise_max", "elementwise_min")

_ACCEPTS = {t: NUMERIC_DTYPES for t in ELEMENTWISE_TYPES} | {"elementwise_max": DTYPES, "elementwise_min": DTYPES}
"""Arithmetic takes numbers; max and min take bools too (or and and)."""

_NOTES = {"elementwise_div": " Integers divide truly, to float64.",
          "elementwise_pow": " An integer to a negative integer power is a run-time error (numpy's rule).",
          "elementwise_max": " On bools: or.", "elementwise_min": " On bools: and."}

def elementwise_pow(xp, x, y):
    """X ** Y (C99's pow on floats: ``xp.pow``). An integer to a negative integer power fails the run on every
    engine, numpy's rule (XLA's integer power gave 3 ** -1 as 2111105451 in int32, torch's 0)."""
    if not xp.isdtype(y.dtype, "real floating"):
        xp.check(xp.all(y >= 0), ValueError("Integers to negative integer powers are not allowed."))
    return xp.pow(x, y)


COMPUTE = {**{t: xp_function(name) for t, name in {
    "elementwise_add": "add", "elementwise_sub": "subtract", "elementwise_mul": "multiply",
    "elementwise_div": "divide", "elementwise_max": "maximum", "elementwise_min": "minimum"}.items()},
    "elementwise_pow": elementwise_pow}
"""op type -> its computation over ``xp`` (``OpSchema.compute``): the array API's functions, NaN winning in max
and min. An engine whose own promotion differs from numpy's (jax divides int32 by int32 in float32) computes
in the declared dtype: the xla engine casts the inputs to it first."""

def elementwise_mod(xp, x, y, *, fmod: bool):
    """X mod Y: the remainder of the floor quotient, numpy's and Python's (the sign of Y, a zero's too, where jax's
    and torch's remainder give a zero X's sign) or, with ``fmod``, of the truncated quotient, C's (the sign of X).
    An integer divisor of zero fails the run on every engine (numpy would warn and give 0, a silent wrong answer);
    a float one gives NaN, IEEE's rule."""
    if not xp.isdtype(y.dtype, "real floating"):
        xp.check(xp.all(y != 0), ZeroDivisionError("integer remainder by zero"))
        return (xp.fmod if fmod else xp.remainder)(x, y)
    if fmod:
        return xp.fmod(x, y)
    out = xp.remainder(x, y)
    return xp.where(out == 0, xp.copysign(out, y), out)


ONNX = {"elementwise_add": "Add", "elementwise_sub": "Sub", "elementwise_mul": "Mul", "elementwise_div": "Div",
        "elementwise_pow": "Pow", "elementwise_max": "Max", "elementwise_min": "Min"}
"""op type -> its one ONNX node (``OpSchema.onnx``)."""

SCHEMAS = tuple(
    schema(t, ["X", "Y"], ["Out"], _true_divide if t == "elementwise_div" else _broadcast,
           doc=f"Out = {t[12:]}(X, Y), with numpy broadcasting.{_NOTES.get(t, '')}",
           dtypes={"X": _ACCEPTS[t], "Y": "X"}, compute=COMPUTE[t], onnx=ONNX[t])
    for t in ELEMENTWISE_TYPES
) + (
    schema("elementwise_mod", ["X", "Y"], ["Out"], _broadcast, {"fmod": Attr("bool", False)},
           doc="Out = X mod Y, with numpy broadcasting: the remainder of the floor quotient (the sign of Y, "
               "Python's %) or, with fmod, of the truncated quotient (the sign of X, C's fmod). Its gradient "
               "is 1 for X and minus the quotient for Y.",
           dtypes={"X": NUMERIC_DTYPES, "Y": "X"}, compute=elementwise_mod),
)


__all__ = ["COMPUTE", "ELEMENTWISE_TYPES", "ONNX", "SCHEMAS", "elementwise_mod", "elementwise_pow"]
