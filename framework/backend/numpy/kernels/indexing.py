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


def top_k(op):
    k, axis, largest = op.attr("k"), op.attr("axis"), op.attr("largest")

    def run(x):
        ax = axis % x.ndim
        if k > x.shape[ax]:
            raise ValueError(f"top_k: k={k} is more than the size {x.shape[ax]} of axis {ax}")
        if largest:  # descending with ties in index order: a stable sort of the reversed axis, reversed back
            n = x.shape[ax]
            order = n - 1 - np.flip(np.argsort(np.flip(x, ax), axis=ax, kind="stable"), ax)
        else:
            order = np.argsort(x, axis=ax, kind="stable")
        indices = np.take(order, np.arange(k), axis=ax).astype(np.int64, copy=False)
        return np.take_along_axis(x, indices, ax), indices

    return run


KERNELS = {"scatter": scatter, "scatter_add": scatter_add, "take_along_axis": take_along_axis,
           "take_along_axis_grad": take_along_axis_grad, "top_k": top_k}

__all__ = ["scatter_rows", "KERNELS"]
