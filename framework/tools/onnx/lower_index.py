"""Lowerings of the ops that read or write elements at integer positions (``program/ops/indexing.py``).

``take_along_axis`` is ONNX ``GatherElements`` and its gradient ``ScatterElements`` adding into zeros;
``scatter``/``scatter_add`` move the scattered axis first and use ``ScatterND`` (replacing or adding
whole rows, one per entry of Index); ``top_k`` is ``TopK``, which, like the compute, puts the lower index first on
ties, and so are ``sort`` and ``argsort``, with K the length of the axis.

Each op states its math as a ``compute`` (``program/ops/indexing.py``), which the exporter cannot trace: it reads
the axis' static length and writes through the engines' ``xp.scatter_rows``. Each keeps the export here, one ONNX
node or a few (``OWN_EXPORTS``).
"""
from __future__ import annotations

import numpy as np

from .context import Lowering
from .graph import fill_value, onnx_dtype
from .lower_math import shape_of

__all__ = ["LOWERINGS", "OWN_EXPORTS"]


def _rows_first(ctx: Lowering, value: str, axis: int, rank: int) -> str:
    return ctx.g.node("Transpose", [value], perm=[axis] + [a for a in range(rank) if a != axis])


def _scatter(reduction: str):
    def lower(ctx):
        """ScatterND into X with ``axis`` moved first, at Index with a last dim of 1 (one position per entry), of
        Updates with Index's dims moved first (no reshape: a -1 there met X's zero-size dims)."""
        g, rank, r = ctx.g, ctx.rank(), ctx.rank("Index")
        axis = ctx.attr("axis") % rank
        updates = g.node("Transpose", [ctx.x("Updates")],
                         perm=[*range(axis, axis + r), *range(axis), *range(axis + r, rank + r - 1)])
        index = g.node("Unsqueeze", [g.node("Cast", [ctx.x("Index")], to=onnx_dtype("int64")), g.ints([-1])])
        moved = g.node("ScatterND", [_rows_first(ctx, ctx.x(), axis, rank), index, updates], reduction=reduction)
        back = [int(a) for a in np.argsort([axis] + [a for a in range(rank) if a != axis])]
        ctx.emit("Transpose", [moved], perm=back)
    return lower


def take_along_axis(ctx):
    index = ctx.g.node("Cast", [ctx.x("Index")], to=onnx_dtype("int64"))
    ctx.emit("GatherElements", [ctx.x(), index], axis=ctx.attr("axis") % ctx.rank())


def take_along_axis_grad(ctx):
    g, dt = ctx.g, ctx.dtype("Out@GRAD")
    zeros = g.node("ConstantOfShape", [shape_of(ctx, ctx.x("X"))], value=fill_value(0, dt))
    index = g.node("Cast", [ctx.x("Index")], to=onnx_dtype("int64"))
    ctx.emit("ScatterElements", [zeros, index, ctx.x("Out@GRAD")], slot="X@GRAD",
             axis=ctx.attr("axis") % ctx.rank(), reduction="add")


def _top_k_node(ctx, k: str, outs: list[str], axis: int, largest: bool) -> None:
    """TopK into ``outs`` (values, indices); ONNX's TopK takes no bools, so those go through int32 and back."""
    g, x = ctx.g, ctx.x()
    if ctx.dtype() != "bool":
        g.node_multi("TopK", [x, k], outs, axis=axis, largest=int(largest), sorted=1)
        return
    ranked = [g.names.fresh("ranked_ints"), outs[1]]
    g.node_multi("TopK", [g.node("Cast", [x], to=onnx_dtype("int32")), k], ranked, axis=axis, largest=int(largest),
                 sorted=1)
    g.node("Cast", [ranked[0]], out=outs[0], to=onnx_dtype("bool"))


def top_k(ctx):
    outs = [ctx.name("Out"), ctx.name("Indices")]
    _top_k_node(ctx, ctx.g.ints([ctx.attr("k")]), outs, ctx.attr("axis") % ctx.rank(), ctx.attr("largest"))
    ctx.set(outs[0], "Out")
    ctx.set(outs[1], "Indices")


def _full_sort(ctx, outs: list[str]) -> None:
    """TopK with K the whole axis: ``sort`` and ``argsort`` (``largest`` = descending; TopK is stable too)."""
    g, axis = ctx.g, ctx.attr("axis") % ctx.rank()
    n = ctx.var().shape[axis]
    k = g.ints([n]) if n >= 0 else g.node("Shape", [ctx.x()], start=axis, end=axis + 1)
    _top_k_node(ctx, k, outs, axis, ctx.attr("descending"))


def sort(ctx):
    outs = [ctx.name("Out"), ctx.name("Indices")]
    _full_sort(ctx, outs)
    ctx.set(outs[0], "Out")
    ctx.set(outs[1], "Indices")


def argsort(ctx):
    outs = [ctx.g.names.fresh("sorted_values"), ctx.name("Indices")]
    _full_sort(ctx, outs)
    ctx.set(outs[1], "Indices")


LOWERINGS = {"scatter": _scatter("none"), "scatter_add": _scatter("add"), "take_along_axis": take_along_axis,
             "take_along_axis_grad": take_along_axis_grad, "top_k": top_k, "sort": sort, "argsort": argsort}
"""gradgen op type -> lowering."""

_ROWS = "ScatterND of whole rows with the axis moved first (the compute reads the axis' static size)"
OWN_EXPORTS = {"scatter": _ROWS, "scatter_add": _ROWS,
               "take_along_axis": "one GatherElements node (ONNX reads negative indices as numpy does)",
               "take_along_axis_grad": "one ScatterElements node adding into zeros (the compute reads static sizes)",
               "top_k": "one TopK node, two outputs (ties in index order, as the compute's stable order)",
               "sort": "one TopK node with K the axis' length, two outputs",
               "argsort": "one TopK node with K the axis' length (the compute reads the axis' static size)"}
"""op type -> why the op, which states its math (``OpSchema.compute``), keeps the export above."""
