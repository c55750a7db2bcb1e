"""Rows written at positions on ATen, as the indexing ops' computes (``program/ops/indexing.py``) ask for them
(``xp.scatter_rows``: ``PRIMITIVES``): ``index_add`` adds repeats one after another in index order, as numpy's
``add.at``. The ops' math is their computes: no kernel is written here."""
from __future__ import annotations

import torch

__all__ = ["PRIMITIVES", "scatter_rows"]


def scatter_rows(base: torch.Tensor, index: torch.Tensor, updates: torch.Tensor, axis: int,
                 add: bool) -> torch.Tensor:
    """``base`` with ``updates`` put, or added, at the in-range ``index`` along ``axis``, as a new tensor;
    ``updates`` shaped like ``take(base, index, axis)``."""
    ax = axis % base.ndim
    rows = torch.reshape(updates, base.shape[:ax] + (index.numel(),) + base.shape[ax + 1:])
    return (torch.index_add if add else torch.index_copy)(base, ax, torch.reshape(index, (-1,)), rows)


PRIMITIVES = {"scatter_rows": scatter_rows}
