"""Rows written at positions, as the indexing ops' computes (``program/ops/indexing.py``) ask for them
(``xp.scatter_rows``: ``PRIMITIVES``), and as ``grad_ops``' gather gradient writes them. The ops' math is their
computes: no kernel is written here."""
from __future__ import annotations

import numpy as np

__all__ = ["PRIMITIVES", "scatter_rows"]


def scatter_rows(base, index, updates, axis: int, add: bool):
    """``base`` (written in place and returned) with ``updates`` put, or added, at ``index`` along ``axis``;
    repeats added one after another in index order (``np.add.at``).

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


def _scatter_rows_copy(base, index, updates, axis: int, add: bool):
    """``scatter_rows`` into a copy of ``base``: a compute's inputs are never written."""
    return scatter_rows(np.array(base, copy=True), index, updates, axis, add)


PRIMITIVES = {"scatter_rows": _scatter_rows_copy}
