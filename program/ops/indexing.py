"""Ops that read or write elements at integer positions: scatter, scatter_add, take_along_axis and top_k.

``scatter_add`` is ``gather``'s adjoint (its updates are shaped like gather's
result), and ``take_along_axis_grad`` is ``take_along_axis``'s, so the
gradients of all of them are written with these same op types.

Each op's math is its ``compute`` over ``xp``. Writing rows at positions is the one thing no array library
names alike (numpy's ``add.at``, jax's ``.at[].add``, torch's ``index_add``; each accumulates repeats in index
order, which fixes the rounding): every engine gives it as ``xp.scatter_rows(base, index, rows, axis, add)``, a
new array. Sorting is a stable argsort (NaN last, -0.0 equal to 0.0), read backwards for descending order. A
negative index counts from the end, as numpy reads it; one outside ``[-size, size)`` is refused on every engine
through ``xp.check`` (XLA would clamp it).
"""
from __future__ import annotations

import math

from ..dtypes import DTYPES, FLOAT_DTYPES, INT_DTYPES, NUMERIC_DTYPES
from ..schema import Attr, TensorType, schema
from ..shapes import dims_agree, normalize_axis, shapes_agree
from .manipulation import positions


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


def take_along_axis(xp, x, index, *, axis):
    ax = axis % x.ndim
    return xp.take_along_axis(x, positions(xp, index, x.shape[ax], "take_along_axis", axis), axis=ax)


def _along(xp, n: int, dim: int, rank: int):
    """0 to n - 1 (int64) along ``dim`` of an array of ``rank`` with dims of 1 elsewhere."""
    return xp.reshape(xp.arange(n, dtype=xp.int64), [n if d == dim else 1 for d in range(rank)])


def take_along_axis_grad(xp, x, index, dout, *, axis):
    """Zeros shaped like X with Out@GRAD added at Index along ``axis`` (each other dim indexing itself), repeats in
    row-major order: one ``scatter_rows`` into X flattened, at each element's flat position."""
    ax = axis % x.ndim
    if any(d != ax and m > n for d, (m, n) in enumerate(zip(index.shape, x.shape))):
        raise IndexError(f"take_along_axis_grad: Index {list(index.shape)} is larger than X {list(x.shape)} off "
                         f"axis {ax}")
    strides = [math.prod(x.shape[d + 1:]) for d in range(x.ndim)]
    at = positions(xp, index, x.shape[ax], "take_along_axis_grad", axis)
    flat = sum((_along(xp, n, d, x.ndim) * strides[d] for d, n in enumerate(index.shape) if d != ax),
               at * strides[ax])
    added = xp.scatter_rows(xp.zeros((math.prod(x.shape),), dtype=dout.dtype), flat,
                            xp.broadcast_to(dout, tuple(index.shape)), 0, add=True)
    return xp.reshape(added, tuple(x.shape))


def scatter(xp, x, index, updates, *, axis):
    """X with Updates' rows put at Index along ``axis``; a position named twice is refused (which would win is
    each library's own)."""
    ax = axis % x.ndim
    at = positions(xp, index, x.shape[ax], "scatter", axis)
    ordered = xp.sort(xp.reshape(at, (-1,)))
    xp.check(xp.all(ordered[1:] != ordered[:-1]), ValueError(
        f"scatter: Index names a position of axis {axis} more than once (use scatter_add to add repeated updates)"))
    return xp.scatter_rows(x, at, updates, ax, add=False)


def scatter_add(xp, x, index, updates, *, axis):
    """X with Updates' rows added at Index along ``axis``, repeats one after another in Index's order."""
    ax = axis % x.ndim
    return xp.scatter_rows(x, positions(xp, index, x.shape[ax], "scatter_add", axis), updates, ax, add=True)


def _stable_order(xp, x, ax: int, descending: bool):
    """The int64 positions that sort ``x`` along ``ax``, equal values in their order both ways: descending is the
    stable ascending order of the reversed axis, reversed back (so NaN, last ascending, comes first)."""
    if not descending:
        return xp.astype(xp.argsort(x, axis=ax, stable=True), xp.int64)
    backwards = xp.argsort(xp.flip(x, axis=ax), axis=ax, stable=True)
    return x.shape[ax] - 1 - xp.astype(xp.flip(backwards, axis=ax), xp.int64)


def sort(xp, x, *, axis, descending):
    ax = axis % x.ndim
    order = _stable_order(xp, x, ax, descending)
    return xp.take_along_axis(x, order, axis=ax), order


def argsort(xp, x, *, axis, descending):
    return _stable_order(xp, x, axis % x.ndim, descending)


def top_k(xp, x, *, k, axis, largest):
    """The first k of X sorted along ``axis`` (largest first, or smallest), ties in index order."""
    ax = axis % x.ndim
    if k > x.shape[ax]:
        raise ValueError(f"top_k: k={k} is more than the size {x.shape[ax]} of axis {ax}")
    order = _stable_order(xp, x, ax, largest)[tuple(slice(0, k) if d == ax else slice(None) for d in range(x.ndim))]
    return xp.take_along_axis(x, order, axis=ax), order


SCATTER_ATTRS = {"axis": Attr("int", 0)}
SORT_ATTRS = {"axis": Attr("int", -1), "descending": Attr("bool", False)}

SCHEMAS = (
    schema("scatter", ["X", "Index", "Updates"], ["Out"], _scatter, SCATTER_ATTRS,
           doc="X with its slices at Index along `axis` replaced by Updates (shaped like gather's result); "
               "a repeated index is an error at run time.",
           dtypes={"X": DTYPES, "Index": INT_DTYPES, "Updates": "X"}, compute=scatter),
    schema("scatter_add", ["X", "Index", "Updates"], ["Out"], _scatter, SCATTER_ATTRS,
           doc="X with Updates added at Index along `axis` (repeats accumulate): the adjoint of gather.",
           dtypes={"X": NUMERIC_DTYPES, "Index": INT_DTYPES, "Updates": "X"}, compute=scatter_add),
    schema("take_along_axis", ["X", "Index"], ["Out"], _take_along_axis, {"axis": Attr("int", 0)},
           doc="X's elements at Index along `axis`, Index shaped like X elsewhere (numpy's take_along_axis).",
           dtypes={"X": DTYPES, "Index": INT_DTYPES}, compute=take_along_axis),
    schema("take_along_axis_grad", ["X", "Index", "Out@GRAD"], ["X@GRAD"], _take_along_axis_grad,
           {"axis": Attr("int", 0)},
           doc="Zeros shaped like X with Out@GRAD added at Index along axis: the adjoint of take_along_axis.",
           dtypes={"X": FLOAT_DTYPES, "Index": INT_DTYPES, "Out@GRAD": "X"}, compute=take_along_axis_grad),
    schema("top_k", ["X"], ["Out", "Indices"], _top_k,
           {"k": Attr("int"), "axis": Attr("int", -1), "largest": Attr("bool", True)},
           doc="The k largest (or smallest) values along `axis`, sorted, and their int64 indices; on ties the "
               "lower index comes first.", dtypes={"X": DTYPES}, compute=top_k),
    schema("sort", ["X"], ["Out", "Indices"], lambda ctx: _sorted(ctx, ("Out", "Indices")), SORT_ATTRS,
           doc="X sorted along `axis` (ascending, or descending), and the int64 positions the values came from; "
               "stable: equal values keep their order, in both directions.", dtypes={"X": DTYPES}, compute=sort),
    schema("argsort", ["X"], ["Indices"], lambda ctx: _sorted(ctx, ("Indices",)), SORT_ATTRS,
           doc="The int64 positions that sort X along `axis` (sort's Indices; stable in both directions).",
           dtypes={"X": DTYPES}, compute=argsort),
)


__all__ = ["SCATTER_ATTRS", "SORT_ATTRS", "SCHEMAS", "argsort", "scatter", "scatter_add", "sort",
           "take_along_axis", "take_along_axis_grad", "top_k"]
