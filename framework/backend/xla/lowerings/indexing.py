"""The index helpers the lowerings read and write with (``take_rows``, ``scatter_rows``), and the rows written at
positions as the indexing ops' computes ask for them (``xp.scatter_rows``: ``PRIMITIVES``), as the numpy kernels
share theirs from their ``indexing``. The indexing ops' lowerings are derived from their computes
(``program/ops/indexing.py``).

Where numpy raises on an index out of range, XLA would clamp: each such lowering wraps negative indexes as numpy
does and states the range with ``ctx.check`` (``in_range``), so the run fails naming the op, as on numpy.
"""
from __future__ import annotations

import jax.numpy as jnp

__all__ = ["PRIMITIVES", "from_end", "in_bounds", "in_range", "scatter_rows", "take_rows"]


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
    ``take(base, index, axis)`` (as ``backend/numpy/kernels/indexing.scatter_rows``); repeats added one after
    another in index order."""
    ax = axis % base.ndim
    rows = jnp.reshape(updates, base.shape[:ax] + (index.size,) + base.shape[ax + 1:])
    moved, rows, flat = jnp.moveaxis(base, ax, 0), jnp.moveaxis(rows, ax, 0), jnp.reshape(index, -1)
    moved = moved.at[flat].add(rows) if add else moved.at[flat].set(rows)
    return jnp.moveaxis(moved, 0, ax)


PRIMITIVES = {"scatter_rows": scatter_rows}
