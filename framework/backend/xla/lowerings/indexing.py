"""The rows written at positions as the indexing ops' computes ask for them (``xp.scatter_rows``: ``PRIMITIVES``),
and ``in_bounds``, which a loop's read-back checks an index history with. The indexing ops' lowerings are derived
from their computes (``program/ops/indexing.py``), whose range checks (``manipulation.positions``) are run-time
checks of the compiled step here: XLA would clamp an index out of range, numpy raises.
"""
from __future__ import annotations

import jax.numpy as jnp

__all__ = ["PRIMITIVES", "in_bounds", "scatter_rows"]


def in_bounds(index, size: int):
    """Whether every entry of ``index`` is in ``[-size, size)`` (numpy raises IndexError outside it)."""
    return jnp.all((index >= -size) & (index < size))


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
