"""Ops that read or write elements at integer positions: scatter, scatter_add, take_along_axis and top_k.

``scatter_add`` is ``gather``'s adjoint (its updates are shaped like gather's
result), and ``take_along_axis_grad`` is ``take_along_axis``'s, so the
gradients of all of them are written with these same op types.
"""
from __future__ import annotations

from ..dtypes import DTYPES, FLOAT_DTYPES, INT_DTYPES, NUMERIC_DTYPES
from ..schema import Attr, TensorType, schema
from ..shapes import dims_agree, normalize_axis, shapes_agree


def _scatter(ctx):
    x, index, updates = ctx.input("X"), ctx.input("Index"), ctx.input("Updates")
    axis = normalize_axis(ctx.attr("axis"), len(x.shape))
    want = tuple(x.shape[:axis]) + tuple(index.shape) + tuple(x.shape[axis + 1:])
    if not shapes_agree(updates.shape, want):  # the schema's dtypes already made Updates X's dtype
        ctx.fail(f"Updates must be {x.dtype}{list(want)} (X's dims with axis {axis} replaced by Index's), "
                 f"got {updates.dtype}{list(updates.shape)}")
    return {"Out": x}


def _take_along_axis(ctx):
    x, index = ctx.input("X"), ctx.input("Index")
    axis = normalize_axis(ctx.attr("axis"), len(x.shape))
    if len(index.shape) != len(x.shape) or not all(
            dims_agree(a, b) for i, (a, b) in enumerate(zip(x.shape, index.shape)) if i != axis):
        ctx.fail(f"Index {list(index.shape)} must have X's rank and X's dims {list(x.shape)} except on axis {axis}")
    shape = tuple(d if i == axis or d != -1 else x.shape[i] for i, d in enumerate(index.shape))
    return {"Out": TensorType(shape, x.dtype)}


def _take_along_axis_grad(ctx):
    return {"X@GRAD": ctx.input("X")}  # the schema's dtypes make Out@GRAD X's dtype and Index an int


def _top_k(ctx):
    x, k = ctx.input("X"), ctx.attr("k")
    if len(x.shape) == 0:
        ctx.fail("top_k needs X of rank >= 1")
    axis = normalize_axis(ctx.attr("axis"), len(x.shape))
    if k < 0 or 0 <= x.shape[axis] < k:
        ctx.fail(f"k={k} must be between 0 and the size {x.shape[axis]} of axis {axis}")
    shape = tuple(k if i == axis else d for i, d in enumerate(x.shape))
    return {"Out": TensorType(shape, x.dtype), "Indices": TensorType(shape, "int64")}


def _sorted(ctx, slots: tuple[str, ...]):
    x = ctx.input("X")
    if len(x.shape) == 0:
        ctx.fail(f"{ctx.op_type} needs X of rank >= 1")
    normalize_axis(ctx.attr("axis"), len(x.shape))
    types = {"Out": x, "Indices": TensorType(x.shape, "int64")}
    return {s: types[s] for s in slots}


SCATTER_ATTRS = {"axis": Attr("int", 0)}
SORT_ATTRS = {"axis": Attr("int", -1), "descending": Attr("bool", False)}

SCHEMAS = (
    schema("scatter", ["X", "Index", "Updates"], ["Out"], _scatter, SCATTER_ATTRS,
           doc="X with its slices at Index along `axis` replaced by Updates (shaped like gather's result); "
               "a repeated index is an error at run time.",
           dtypes={"X": DTYPES, "Index": INT_DTYPES, "Updates": "X"}),
    schema("scatter_add", ["X", "Index", "Updates"], ["Out"], _scatter, SCATTER_ATTRS,
           doc="X with Updates added at Index along `axis` (repeats accumulate): the adjoint of gather.",
           dtypes={"X": NUMERIC_DTYPES, "Index": INT_DTYPES, "Updates": "X"}),
    schema("take_along_axis", ["X", "Index"], ["Out"], _take_along_axis, {"axis": Attr("int", 0)},
           doc="X's elements at Index along `axis`, Index shaped like X elsewhere (numpy's take_along_axis).",
           dtypes={"X": DTYPES, "Index": INT_DTYPES}),
    schema("take_along_axis_grad", ["X", "Index", "Out@GRAD"], ["X@GRAD"], _take_along_axis_grad,
           {"axis": Attr("int", 0)},
           doc="Zeros shaped like X with Out@GRAD added at Index along axis: the adjoint of take_along_axis.",
           dtypes={"X": FLOAT_DTYPES, "Index": INT_DTYPES, "Out@GRAD": "X"}),
    schema("top_k", ["X"], ["Out", "Indices"], _top_k,
           {"k": Attr("int"), "axis": Attr("int", -1), "largest": Attr("bool", True)},
           doc="The k largest (or smallest) values along `axis`, sorted, and their int64 indices; on ties the "
               "lower index comes first.", dtypes={"X": DTYPES}),
    schema("sort", ["X"], ["Out", "Indices"], lambda ctx: _sorted(ctx, ("Out", "Indices")), SORT_ATTRS,
           doc="X sorted along `axis` (ascending, or descending), and the int64 positions the values came from; "
               "stable: equal values keep their order, in both directions.", dtypes={"X": DTYPES}),
    schema("argsort", ["X"], ["Indices"], lambda ctx: _sorted(ctx, ("Indices",)), SORT_ATTRS,
           doc="The int64 positions that sort X along `axis` (sort's Indices; stable in both directions).",
           dtypes={"X": DTYPES}),
)


__all__ = ["SCATTER_ATTRS", "SORT_ATTRS", "SCHEMAS"]
