"""Kernels that read or write elements at integer positions (see ``program/ops/indexing.py``)."""
from __future__ import annotations

import numpy as np


def scatter_rows(base, index, updates, axis: int, add: bool):
    """``base`` (written in place and returned) with ``updates`` put, or added, at ``index`` along ``axis``.

    ``updates`` is shaped like ``np.take(base, index, axis)``: base's dims with ``axis`` replaced by index's.
    """
    ax = axis % base.ndim
    moved = np.moveaxis(base, ax, 0)  # a view: writes land in base
    rows = np.moveaxis(np.reshape(updates, base.shape[:ax] + (np.size(index),) + base.shape[ax + 1:]), ax, 0)
    flat = np.reshape(index, -1)
    if add:
        np.add.at(moved, flat, rows)
    else:
        moved[flat] = rows
    return base


def _unique_positions(index, size: int, axis: int) -> None:
    """Refuse indexes outside ``[-size, size)`` or naming one position twice (which update wins is undefined)."""
    flat = np.reshape(index, -1)
    if flat.size and (flat.min() < -size or flat.max() >= size):
        raise IndexError(f"scatter: an index in [{flat.min()}, {flat.max()}] is out of range for size {size} "
                         f"of axis {axis}")
    positions = flat % max(size, 1)
    if np.unique(positions).size != positions.size:
        raise ValueError(f"scatter: Index names a position of axis {axis} more than once (use scatter_add to add "
                         "repeated updates)")


def scatter(op):
    axis = op.attr("axis")

    def run(x, index, updates):
        _unique_positions(index, x.shape[axis % x.ndim], axis)
        return scatter_rows(np.array(x, copy=True), index, updates, axis, add=False)

    return run


def scatter_add(op):
    axis = op.attr("axis")
    return lambda x, index, updates: scatter_rows(np.array(x, copy=True), index, updates, axis, add=True)


def take_along_axis(op):
    axis = op.attr("axis")
    return lambda x, index: np.take_along_axis(x, index.astype(np.int64, copy=False), axis % x.ndim)


def take_along_axis_grad(op):
    axis = op.attr("axis")

    def run(x, index, dout):
        ax = axis % x.ndim
        where = list(np.ix_(*(np.arange(n) for n in index.shape)))  # every other dim indexes itself
        where[ax] = index
        dx = np.zeros(x.shape, dtype=dout.dtype)
        np.add.at(dx, tuple(where), dout)
        return dx

    return run


def stable_order(x, ax: int, descending: bool):
    """The int64 positions that sort ``x`` along ``ax``; equal values keep their order in both directions."""
    if descending:  # a stable sort of the reversed axis, reversed back, puts the lower index first on ties
        order = x.shape[ax] - 1 - np.flip(np.argsort(np.flip(x, ax), axis=ax, kind="stable"), ax)
    else:
        order = np.argsort(x, axis=ax, kind="stable")
    return order.astype(np.int64, copy=False)


def top_k(op):
    k, axis, largest = op.attr("k"), op.attr("axis"), op.attr("largest")

    def run(x):
        ax = axis % x.ndim
        if k > x.shape[ax]:
            raise ValueError(f"top_k: k={k} is more than the size {x.shape[ax]} of axis {ax}")
        indices = np.take(stable_order(x, ax, largest), np.arange(k), axis=ax)
        return np.take_along_axis(x, indices, ax), indices

    return run


def sort(op):
    axis, descending = op.attr("axis"), op.attr("descending")

    def run(x):
        indices = stable_order(x, axis % x.ndim, descending)
        return np.take_along_axis(x, indices, axis % x.ndim), indices

    return run


def argsort(op):
    axis, descending = op.attr("axis"), op.attr("descending")
    return lambda x: stable_order(x, axis % x.ndim, descending)


KERNELS = {"scatter": scatter, "scatter_add": scatter_add, "take_along_axis": take_along_axis,
           "take_along_axis_grad": take_along_axis_grad, "top_k": top_k, "sort": sort, "argsort": argsort}

__all__ = ["scatter_rows", "stable_order", "KERNELS"]
