"""Ops that make tensors: constants, random initializers, copies and casts."""
from __future__ import annotations

from ..dtypes import DTYPES, FLOAT_DTYPES, INT_DTYPES, unrepresentable
from ..schema import Attr, TensorType, same_as, schema

_INT_BITS = {"int32": 31, "int64": 63}
"""Value bits of each integer dtype: its values are [-2**bits, 2**bits)."""


def _check_value(ctx, dtype: str) -> None:
    """The ``value`` attr must be stored exactly in ``dtype``: no silent rounding of 2.5 to an int, or wrap-around."""
    problem = unrepresentable(ctx.attr("value"), dtype)
    if problem is not None:
        ctx.fail(f"value {problem}")


def _from_attrs(ctx):
    shape = ctx.attr("shape")
    if any(d < 0 for d in shape):
        ctx.fail(f"shape {shape} must be fully known (no -1) for a created tensor")
    return {"Out": TensorType(tuple(shape), ctx.attr("dtype"))}


def _filled(ctx):
    _check_value(ctx, ctx.attr("dtype"))
    return _from_attrs(ctx)


def _like(ctx):
    x = ctx.input("X")
    return {"Out": TensorType(x.shape, ctx.attr("dtype") or x.dtype)}


def _filled_like(ctx):
    out = _like(ctx)
    _check_value(ctx, out["Out"].dtype)
    return out


def _cast(ctx):
    return {"Out": TensorType(ctx.input("X").shape, ctx.attr("out_dtype"))}


def fill_constant(xp, *, shape, dtype, value):
    """``value`` everywhere in ``shape``, rounded once to ``dtype`` (the schema refuses a value it cannot hold)."""
    return xp.full(tuple(shape), value, dtype=dtype)


def fill_any_like(xp, x, *, value, dtype):
    """``value`` everywhere in X's run-time shape, as ``dtype`` (X's own when empty)."""
    return xp.full_like(x, value, dtype=dtype or x.dtype)


def fill_zeros_like(xp, x, *, dtype):
    """Zeros shaped like X: the fill of 0."""
    return fill_any_like(xp, x, value=0, dtype=dtype)


def assign(xp, x):
    """X itself: kernels never write their inputs, so a shared array is as good as a copy."""
    return x


def _float_to_int(xp, x, out_dtype: str):
    """Floats truncated toward zero; a float no integer of ``out_dtype`` holds (NaN, +-inf, out of range) becomes
    the dtype's most negative value, x86's answer, which numpy gives (XLA saturates, and gives 0 for NaN)."""
    if x.dtype == xp.float16:  # exactly widened: 2**31 is inf in float16, but every finite float16 fits
        x = xp.astype(x, xp.float32)
    bound = 2 ** _INT_BITS[out_dtype]
    fits = (x > -float(bound)) & (x < float(bound))
    return xp.where(fits, xp.astype(xp.where(fits, x, 0), out_dtype), -bound)


def _float64_to_float16(xp, x):
    """float64 rounded once to float16: first to float32 rounded to odd (an inexact value takes whichever of its
    two float32 neighbours has an odd last bit, never a float16 halfway point), then to nearest. Rounded to nearest
    twice, as jax and torch convert, 65519.99 became 65520.0, a tie, and then inf, where numpy gives 65504."""
    near = xp.astype(x, xp.float32)
    wide = xp.astype(near, xp.float64)
    other = xp.nextafter(near, xp.astype(xp.where(x > wide, xp.inf, -xp.inf), xp.float32))
    even = xp.astype((wide + xp.astype(other, xp.float64)) / 2, xp.float32)  # a tie goes to the even neighbour
    odd = xp.where(even == near, other, near)
    return xp.astype(xp.where(wide == x, near, odd), xp.float16)


def rounded(xp, x, dtype):
    """Float64 ``x`` rounded once to the float ``dtype`` (the engine's dtype object), as numpy's conversion rounds
    it (``_float64_to_float16``)."""
    return _float64_to_float16(xp, x) if dtype == xp.float16 else xp.astype(x, dtype)


def cast(xp, x, *, out_dtype):
    """X converted to ``out_dtype`` as numpy converts: floats to integers truncate toward zero (``_float_to_int``
    for the values no integer holds), float64 to float16 rounds once (``_float64_to_float16``)."""
    if out_dtype in INT_DTYPES and xp.isdtype(x.dtype, "real floating"):
        return _float_to_int(xp, x, out_dtype)
    if out_dtype == "float16" and x.dtype == xp.float64:
        return _float64_to_float16(xp, x)
    return xp.astype(x, out_dtype, copy=False)


SHAPE_DTYPE = {"shape": Attr("ints"), "dtype": Attr("dtype", "float32")}

SCHEMAS = (
    schema("fill_constant", [], ["Out"], _filled, {**SHAPE_DTYPE, "value": Attr("scalar", 0.0)},
           doc="A tensor of the given shape and dtype filled with one value, which the dtype must hold exactly "
               "(an int value stays an int: int64 values above 2**53 are exact).", dtypes={"dtype": DTYPES},
           compute=fill_constant),
    schema("uniform_random", [], ["Out"], _from_attrs,
           {**SHAPE_DTYPE, "min": Attr("float", -1.0), "max": Attr("float", 1.0), "seed": Attr("int", 0),
            "redraw": Attr("bool", False)},
           doc="Uniform samples in [min, max) from a PCG64 generator seeded with `seed`: the same samples every run, "
               "or with `redraw` a new sample each run from one stream per plan (dropout's rule: the same seed "
               "gives the same sequence of samples).", stateful=True,
           dtypes={"dtype": FLOAT_DTYPES}),
    schema("gaussian_random", [], ["Out"], _from_attrs,
           {**SHAPE_DTYPE, "mean": Attr("float", 0.0), "std": Attr("float", 1.0), "seed": Attr("int", 0),
            "redraw": Attr("bool", False)},
           doc="Normal samples from a PCG64 generator seeded with `seed` (`redraw` as uniform_random's).",
           stateful=True,
           dtypes={"dtype": FLOAT_DTYPES}),
    schema("fill_any_like", ["X"], ["Out"], _filled_like,
           {"value": Attr("scalar", 0.0), "dtype": Attr("optional_dtype", "")},
           doc="A tensor shaped like X filled with `value` (dtype: X's unless given; it must hold the value exactly).",
           dtypes={"X": DTYPES, "dtype": DTYPES}, compute=fill_any_like, inputs_as_given=True),
    schema("fill_zeros_like", ["X"], ["Out"], _like, {"dtype": Attr("optional_dtype", "")},
           doc="Zeros shaped like X; the backward pass uses it for gradients nothing produced.",
           dtypes={"X": DTYPES, "dtype": DTYPES}, compute=fill_zeros_like, inputs_as_given=True),
    schema("assign", ["X"], ["Out"], same_as("X"), doc="Out = X (a copy in meaning; kernels may share memory).",
           dtypes={"X": DTYPES}, compute=assign),
    schema("cast", ["X"], ["Out"], _cast, {"out_dtype": Attr("dtype")},
           doc="X converted to `out_dtype` (numpy's conversion: floats to ints truncate toward zero; NaN, inf and "
               "floats beyond the integers' range become the most negative integer, as on x86).",
           dtypes={"X": DTYPES, "out_dtype": DTYPES}, compute=cast, inputs_as_given=True),
)


__all__ = ["SHAPE_DTYPE", "SCHEMAS", "assign", "cast", "fill_any_like", "fill_constant", "fill_zeros_like", "rounded"]
