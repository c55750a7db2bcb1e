"""Lowerings of the ops that read and write at indexes, sort and rank (``backend/numpy/kernels/indexing.py``), and
the index helpers the other lowerings read and write with (``take_rows``, ``scatter_rows``), as the numpy kernels
share theirs from their ``indexing``.

Where numpy raises on an index out of range, XLA would clamp: each such lowering wraps negative indexes as numpy
does and states the range with ``ctx.check`` (``in_range``), so the run fails naming the op, as on numpy.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["LOWERINGS", "from_end", "in_bounds", "in_range", "scatter_rows", "take_rows"]


def in_bounds(index, size: int):
    """Whether every entry of ``index`` is in ``[-size, size)`` (numpy raises IndexError outside it)."""
    return jnp.all((index >= -size) & (index < size))


def from_end(index, size: int):
    """``index`` with negative entries counted from the end (numpy's reading)."""
    return jnp.where(index < 0, index + size, index)


def in_range(ctx, index, size: int, what: str):
    """``from_end(index)``, after checking it is ``in_bounds`` (a run-time check)."""
    ctx.check(in_bounds(index, size), f"{what}: an index is out of bounds for an axis of size {size} (IndexError "
                                      "in numpy)")
    return from_end(index, size)


def take_rows(x, index, axis: int):
    """``take(x, index, axis)`` of in-range indexes. From an empty axis (where every index failed its check, or
    none is read) it gives zeros of the right shape: a loop body that never runs is traced all the same."""
    if x.shape[axis] == 0:
        return jnp.zeros(x.shape[:axis] + jnp.shape(index) + x.shape[axis + 1:], x.dtype)
    return jnp.take(x, index, axis=axis, mode="clip")


def scatter_rows(base, index, updates, axis: int, add: bool):
    """``base`` with ``updates`` put, or added, at the in-range ``index`` along ``axis``; ``updates`` shaped like
    ``take(base, index, axis)`` (as ``backend/numpy/kernels/indexing.scatter_rows``)."""
    ax = axis % base.ndim
    rows = jnp.reshape(updates, base.shape[:ax] + (index.size,) + base.shape[ax + 1:])
    moved, rows, flat = jnp.moveaxis(base, ax, 0), jnp.moveaxis(rows, ax, 0), jnp.reshape(index, -1)
    moved = moved.at[flat].add(rows) if add else moved.at[flat].set(rows)
    return jnp.moveaxis(moved, 0, ax)


def stable_order(x, ax: int, descending: bool):
    """The int64 positions that sort ``x`` along ``ax``, equal values in their order both ways (NaN last), as
    ``backend/numpy/kernels/indexing.stable_order``."""
    if descending:
        order = x.shape[ax] - 1 - jnp.flip(jnp.argsort(jnp.flip(x, ax), axis=ax, stable=True), ax)
    else:
        order = jnp.argsort(x, axis=ax, stable=True)
    return order.astype(jnp.int64)


def _top_k(op, ctx):
    k, axis, largest = op.attr("k"), op.attr("axis"), op.attr("largest")

    def run(x):
        ax = axis % x.ndim
        n = x.shape[ax]
        if k > n:
            raise ValueError(f"top_k: k={k} is more than the size {n} of axis {ax}")
        indices = jax.lax.slice_in_dim(stable_order(x, ax, largest), 0, k, axis=ax)  # ties in index order
        return jnp.take_along_axis(x, indices, ax), indices

    return run


def _sort(op, ctx):
    axis, descending = op.attr("axis"), op.attr("descending")

    def run(x):
        order = stable_order(x, axis % x.ndim, descending)
        return jnp.take_along_axis(x, order, axis % x.ndim), order

    return run


def _argsort(op, ctx):
    axis, descending = op.attr("axis"), op.attr("descending")
    return lambda x: stable_order(x, axis % x.ndim, descending)


def _scatter(op, ctx):
    axis = op.attr("axis")

    def run(x, index, updates):
        size = x.shape[axis % x.ndim]
        index = in_range(ctx, index, size, "scatter")
        flat = jnp.sort(jnp.reshape(index, -1))
        ctx.check(jnp.all(flat[1:] != flat[:-1]), f"scatter: Index names a position of axis {axis} more than once "
                                                   "(use scatter_add to add repeated updates)")
        return scatter_rows(x, index, updates, axis, add=False)

    return run


def _scatter_add(op, ctx):
    axis = op.attr("axis")

    def run(x, index, updates):
        index = in_range(ctx, index, x.shape[axis % x.ndim], "scatter_add")
        return scatter_rows(x, index, updates, axis, add=True)

    return run


def _take_along_axis(op, ctx):
    axis = op.attr("axis")

    def run(x, index):
        ax = axis % x.ndim
        index = in_range(ctx, index.astype(np.int64), x.shape[ax], "take_along_axis")
        if x.shape[ax] == 0:  # as take_rows
            return jnp.zeros(jnp.broadcast_shapes(x.shape[:ax] + (1,) + x.shape[ax + 1:], index.shape), x.dtype)
        return jnp.take_along_axis(x, index, ax, mode="clip")

    return run


def _take_along_axis_grad(op, ctx):
    axis = op.attr("axis")

    def run(x, index, dout):
        ax = axis % x.ndim
        if any(i != ax and n > x.shape[i] for i, n in enumerate(index.shape)):
            raise ValueError(f"Index {list(index.shape)} is larger than X {list(x.shape)} off axis {ax}")
        where = [jax.lax.broadcasted_iota(np.int64, index.shape, d) for d in range(index.ndim)]
        where[ax] = in_range(ctx, index.astype(np.int64), x.shape[ax], "take_along_axis_grad")
        return jnp.zeros(x.shape, dout.dtype).at[tuple(where)].add(dout)  # each other dim indexes itself

    return run


LOWERINGS = {
    "top_k": _top_k, "sort": _sort, "argsort": _argsort, "scatter": _scatter, "scatter_add": _scatter_add,
    "take_along_axis": _take_along_axis, "take_along_axis_grad": _take_along_axis_grad,
}
