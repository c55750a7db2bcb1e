"""Ops that make tensors: constants, random initializers, copies and casts."""
from __future__ import annotations

from ..dtypes import DTYPES, FLOAT_DTYPES, unrepresentable
from ..schema import Attr, TensorType, same_as, schema


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


SHAPE_DTYPE = {"shape": Attr("ints"), "dtype": Attr("dtype", "float32")}

SCHEMAS = (
    schema("fill_constant", [], ["Out"], _filled, {**SHAPE_DTYPE, "value": Attr("scalar", 0.0)},
           doc="A tensor of the given shape and dtype filled with one value, which the dtype must hold exactly "
               "(an int value stays an int: int64 values above 2**53 are exact).", dtypes={"dtype": DTYPES}),
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
           dtypes={"X": DTYPES, "dtype": DTYPES}),
    schema("fill_zeros_like", ["X"], ["Out"], _like, {"dtype": Attr("optional_dtype", "")},
           doc="Zeros shaped like X; the backward pass uses it for gradients nothing produced.",
           dtypes={"X": DTYPES, "dtype": DTYPES}),
    schema("assign", ["X"], ["Out"], same_as("X"), doc="Out = X (a copy in meaning; kernels may share memory).",
           dtypes={"X": DTYPES}),
    schema("cast", ["X"], ["Out"], _cast, {"out_dtype": Attr("dtype")},
           doc="X converted to `out_dtype` (numpy's conversion: floats to ints truncate toward zero).",
           dtypes={"X": DTYPES, "out_dtype": DTYPES}),
)


__all__ = ["SHAPE_DTYPE", "SCHEMAS"]
