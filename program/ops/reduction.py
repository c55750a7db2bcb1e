"""Reductions over some or all dims."""
from __future__ import annotations

from ..schema import Attr, TensorType, same_as, schema
from ..shapes import normalize_axes


def reduced_shape(shape, dim, keep_dim, reduce_all):
    """The shape after reducing ``dim`` (all dims when ``reduce_all`` or ``dim`` is empty)."""
    rank = len(shape)
    axes = set(range(rank)) if (reduce_all or not dim) else set(normalize_axes(dim, rank))
    if keep_dim:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduce(ctx):
    x = ctx.input("X")
    shape = reduced_shape(x.shape, ctx.attr("dim"), ctx.attr("keep_dim"), ctx.attr("reduce_all"))
    return {"Out": TensorType(shape, x.dtype)}


def _float_reduce(ctx):
    if not ctx.input("X").dtype.startswith("float"):
        ctx.fail(f"X must be a float tensor, got {ctx.input('X').dtype}")
    return _reduce(ctx)


def _mean(ctx):
    return {"Out": TensorType((), ctx.input("X").dtype)}


def _mean_grad(ctx):
    x, g = ctx.input("X"), ctx.input("Out@GRAD")
    want = reduced_shape(x.shape, ctx.attr("dim"), ctx.attr("keep_dim"), ctx.attr("reduce_all"))
    if len(want) != len(g.shape):
        ctx.fail(f"Out@GRAD has rank {len(g.shape)}, expected the reduced shape {list(want)}")
    return {"X@GRAD": TensorType(x.shape, g.dtype)}


REDUCE_ATTRS = {"dim": Attr("ints", []), "keep_dim": Attr("bool", False), "reduce_all": Attr("bool", False)}
REDUCE_TYPES = ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min")

SCHEMAS = tuple(
    schema(t, ["X"], ["Out"], _reduce, REDUCE_ATTRS, doc=f"{t[7:]} over `dim` (every dim when empty or reduce_all).")
    for t in REDUCE_TYPES
) + (
    schema("reduce_prod", ["X"], ["Out"], _reduce, REDUCE_ATTRS,
           doc="prod over `dim` (every dim when empty or reduce_all); 1 over no elements."),
    schema("prod_others", ["X"], ["Out"], same_as("X"),
           {"dim": Attr("ints", []), "reduce_all": Attr("bool", False)},
           doc="For each element, the product of the other elements reduce_prod over `dim` multiplies it with: "
               "reduce_prod's gradient without a division, exact at zeros."),
    schema("logsumexp", ["X"], ["Out"], _float_reduce, REDUCE_ATTRS,
           doc="log(sum(exp(X))) over `dim`, computed from X - max: finite for any finite X."),
    schema("mean", ["X"], ["Out"], _mean, doc="The mean of all elements, a scalar."),
    schema("reduce_mean_grad", ["X", "Out@GRAD"], ["X@GRAD"], _mean_grad, REDUCE_ATTRS,
           doc="reduce_mean's gradient: Out@GRAD broadcast to X's run-time shape, divided by the count."),
)


__all__ = ["reduced_shape", "REDUCE_ATTRS", "REDUCE_TYPES", "SCHEMAS"]
