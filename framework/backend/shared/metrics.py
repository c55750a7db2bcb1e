"""The metric formulas both engines compute, written once over an array module ``xp`` (numpy in the numpy
kernels, ``jax.numpy`` in the xla lowerings): where the labelled class ranks, and the area under the ROC curve
of per-bucket counts.

A class ranks before another when its score is higher, or equal with a lower index; NaN ranks above every number
(numpy's ``argmax`` and ``sort`` order), so ``accuracy`` with k = 1 agrees with ``argmax``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["area_under_counts", "label_ranks"]


def label_ranks(x, ids, xp=np):
    """Per row, how many classes rank before the labelled one (its 0-based place in ``top_k``'s order)."""
    mine = xp.take_along_axis(x, ids[:, None], 1) if x.shape[0] else xp.zeros((0, 1), x.dtype)
    nan, mine_nan = xp.isnan(x), xp.isnan(mine)
    higher = (x > mine) | (nan & ~mine_nan)
    same = (x == mine) | (nan & mine_nan)
    return xp.count_nonzero(higher | (same & (xp.arange(x.shape[1]) < ids[:, None])), axis=1)


def area_under_counts(positives, negatives, xp=np):
    """The ROC AUC of per-bucket counts (bucket i scores below bucket i + 1), rows in one bucket counting as half a
    pair: each negative adds the positives above its bucket and half of those in it. 0 without both classes.
    Whole (or half) numbers, exact in float64 whatever the order of the sums (``xp`` as ``label_ranks``')."""
    above = xp.sum(positives) - xp.cumsum(positives)
    pairs = xp.sum(negatives * (above + 0.5 * positives))
    return xp.asarray(pairs / xp.maximum(xp.sum(positives) * xp.sum(negatives), 1.0), np.float64)
