"""Reductions over some or all dims.

The result keeps X's dtype, except where numpy's (and Paddle's) answer is
another: a mean of integers or bools is float64, and a sum of int32 or bool
is int64 (a count, not an overflowing int32 or an ``or``).
"""
from __future__ import annotations

from ..dtypes import DTYPES, FLOAT_DTYPES, NUMERIC_DTYPES
from ..schema import Attr, TensorType, same_as, schema
from ..shapes import normalize_axes


def reduced_shape(shape, dim, keep_dim, reduce_all):
    """The shape after reducing ``dim`` (all dims when ``reduce_all`` or ``dim`` is empty)."""
    rank = len(shape)
    axes = set(range(rank)) if (reduce_all or not dim) else set(normalize_axes(dim, rank))
    if keep_dim:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


MEAN_DTYPE = {"int32": "float64", "int64": "float64", "bool": "float64"}
SUM_DTYPE = {"int32": "int64", "bool": "int64"}
"""A reduction's result dtype where it is not X's."""


def _reduce_to(dtypes):
    def infer(ctx):
        x = ctx.input("X")
        shape = reduced_shape(x.shape, ctx.attr("dim"), ctx.attr("keep_dim"), ctx.attr("reduce_all"))
        return {"Out": TensorType(shape, dtypes.get(x.dtype, x.dtype))}

    return infer


def _mean(ctx):
    x = ctx.input("X")
    return {"Out": TensorType((), MEAN_DTYPE.get(x.dtype, x.dtype))}


def _mean_grad(ctx):
    x, g = ctx.input("X"), ctx.input("Out@GRAD")
    want = reduced_shape(x.shape, ctx.attr("dim"), ctx.attr("keep_dim"), ctx.attr("reduce_all"))
    if len(want) != len(g.shape):
        ctx.fail(f"Out@GRAD has rank {len(g.shape)}, expected the reduced shape {list(want)}")
    return {"X@GRAD": TensorType(x.shape, g.dtype)}


REDUCE_ATTRS = {"dim": Attr("ints", []), "keep_dim": Attr("bool", False), "reduce_all": Attr("bool", False)}
REDUCE_TYPES = ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min")

_RESULT_DTYPES = {"reduce_sum": SUM_DTYPE, "reduce_mean": MEAN_DTYPE}

SCHEMAS = tuple(
    schema(t, ["X"], ["Out"], _reduce_to(_RESULT_DTYPES.get(t, {})), REDUCE_ATTRS,
           doc=f"{t[7:]} over `dim` (every dim when empty or reduce_all)."
               + (" max and min of an empty axis are a run-time error." if t in ("reduce_max", "reduce_min") else ""),
           dtypes={"X": DTYPES})
    for t in REDUCE_TYPES
) + (
    schema("reduce_prod", ["X"], ["Out"], _reduce_to({}), REDUCE_ATTRS,
           doc="prod over `dim` (every dim when empty or reduce_all); 1 over no elements; in X's dtype.",
           dtypes={"X": NUMERIC_DTYPES}),
    schema("prod_others", ["X"], ["Out"], same_as("X"),
           {"dim": Attr("ints", []), "reduce_all": Attr("bool", False)},
           doc="For each element, the product of the other elements reduce_prod over `dim` multiplies it with: "
               "reduce_prod's gradient without a division, exact at zeros.",
           dtypes={"X": NUMERIC_DTYPES}),
    schema("logsumexp", ["X"], ["Out"], _reduce_to({}), REDUCE_ATTRS,
           doc="log(sum(exp(X))) over `dim`, computed from X - max: finite for any finite X.",
           dtypes={"X": FLOAT_DTYPES}),
    schema("mean", ["X"], ["Out"], _mean, doc="The mean of all elements, a scalar (float64 for ints and bools).",
           dtypes={"X": DTYPES}),
    schema("reduce_mean_grad", ["X", "Out@GRAD"], ["X@GRAD"], _mean_grad, REDUCE_ATTRS,
           doc="reduce_mean's gradient: Out@GRAD broadcast to X's run-time shape, divided by the count.",
           dtypes={"X": FLOAT_DTYPES, "Out@GRAD": "X"}),
)


__all__ = ["reduced_shape", "MEAN_DTYPE", "SUM_DTYPE", "REDUCE_ATTRS", "REDUCE_TYPES", "SCHEMAS"]
