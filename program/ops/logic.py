"""Comparisons, selection and index ops: bool and int results through which no gradient flows (but where)."""
from __future__ import annotations

from ..dtypes import INT_DTYPES
from ..schema import Attr, TensorType, schema
from ..shapes import broadcast_shapes, normalize_axis


def _compare(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    if x.dtype != y.dtype:
        ctx.fail(f"dtypes differ: {x.dtype} vs {y.dtype} (cast one of them first)")
    return {"Out": TensorType(broadcast_shapes(x.shape, y.shape), "bool")}


def _where(ctx):
    cond, x, y = ctx.input("Condition"), ctx.input("X"), ctx.input("Y")
    if cond.dtype != "bool":
        ctx.fail(f"Condition must be bool, got {cond.dtype}")
    if x.dtype != y.dtype:
        ctx.fail(f"dtypes differ: X is {x.dtype}, Y is {y.dtype}")
    return {"Out": TensorType(broadcast_shapes(cond.shape, x.shape, y.shape), x.dtype)}


def _argmax(ctx):
    x = ctx.input("X")
    axis = normalize_axis(ctx.attr("axis"), len(x.shape))
    if ctx.attr("keep_dim"):
        shape = tuple(1 if i == axis else d for i, d in enumerate(x.shape))
    else:
        shape = tuple(d for i, d in enumerate(x.shape) if i != axis)
    return {"Out": TensorType(shape, "int64")}


def _one_hot(ctx):
    x = ctx.input("X")
    if x.dtype not in INT_DTYPES:
        ctx.fail(f"X must hold integer class ids, got {x.dtype}")
    if ctx.attr("depth") <= 0:
        ctx.fail(f"depth must be positive, got {ctx.attr('depth')}")
    return {"Out": TensorType(tuple(x.shape) + (ctx.attr("depth"),), ctx.attr("dtype"))}


COMPARISONS = ("less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal")

SCHEMAS = tuple(
    schema(t, ["X", "Y"], ["Out"], _compare, doc=f"Out = {t}(X, Y) elementwise, bool, with broadcasting.")
    for t in COMPARISONS
) + (
    schema("where", ["Condition", "X", "Y"], ["Out"], _where,
           doc="X where Condition holds, else Y; all three broadcast."),
    schema("argmax", ["X"], ["Out"], _argmax, {"axis": Attr("int"), "keep_dim": Attr("bool", False)},
           doc="The int64 index of the largest value along `axis` (first one on ties)."),
    schema("argmin", ["X"], ["Out"], _argmax, {"axis": Attr("int"), "keep_dim": Attr("bool", False)},
           doc="The int64 index of the smallest value along `axis` (first one on ties)."),
    schema("one_hot", ["X"], ["Out"], _one_hot, {"depth": Attr("int"), "dtype": Attr("dtype", "float32")},
           doc="A `depth`-long 0/1 vector per integer of X, appended as a last dim."),
)


__all__ = ["COMPARISONS", "SCHEMAS"]
