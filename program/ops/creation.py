"""Ops that make tensors: constants, random initializers, copies and casts."""
from __future__ import annotations

from ..schema import Attr, Slot, TensorType, same_as, schema


def _from_attrs(ctx):
    shape = ctx.attr("shape")
    if any(d < 0 for d in shape):
        ctx.fail(f"shape {shape} must be fully known (no -1) for a created tensor")
    return {"Out": TensorType(tuple(shape), ctx.attr("dtype"))}


def _like(ctx):
    x = ctx.input("X")
    dtype = ctx.attr("dtype") or x.dtype
    return {"Out": TensorType(x.shape, dtype)}


def _cast(ctx):
    return {"Out": TensorType(ctx.input("X").shape, ctx.attr("out_dtype"))}


SHAPE_DTYPE = {"shape": Attr("ints"), "dtype": Attr("dtype", "float32")}

SCHEMAS = (
    schema("fill_constant", [], ["Out"], _from_attrs, {**SHAPE_DTYPE, "value": Attr("float", 0.0)},
           doc="A tensor of the given shape and dtype filled with one value."),
    schema("uniform_random", [], ["Out"], _from_attrs,
           {**SHAPE_DTYPE, "min": Attr("float", -1.0), "max": Attr("float", 1.0), "seed": Attr("int", 0)},
           doc="Uniform samples in [min, max) from a PCG64 generator seeded with `seed`.", stateful=True),
    schema("gaussian_random", [], ["Out"], _from_attrs,
           {**SHAPE_DTYPE, "mean": Attr("float", 0.0), "std": Attr("float", 1.0), "seed": Attr("int", 0)},
           doc="Normal samples from a PCG64 generator seeded with `seed`.", stateful=True),
    schema("fill_any_like", ["X"], ["Out"], _like, {"value": Attr("float", 0.0), "dtype": Attr("optional_dtype", "")},
           doc="A tensor shaped like X filled with `value` (dtype: X's unless given)."),
    schema("fill_zeros_like", ["X"], ["Out"], _like, {"dtype": Attr("optional_dtype", "")},
           doc="Zeros shaped like X; the backward pass uses it for gradients nothing produced."),
    schema("assign", ["X"], ["Out"], same_as("X"), doc="Out = X (a copy in meaning; kernels may share memory)."),
    schema("cast", ["X"], ["Out"], _cast, {"out_dtype": Attr("dtype")}, doc="X converted to `out_dtype`."),
)


__all__ = ["SHAPE_DTYPE", "SCHEMAS"]
