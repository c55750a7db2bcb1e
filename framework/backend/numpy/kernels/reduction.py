"""The reduction kernels that do not state their math over ``xp`` (the others are derived: ``derived``)."""
from __future__ import annotations

import numpy as np

from ...shared.reduction import axes_of


def prod_others(op):
    """Exclusive running products from both ends, multiplied: O(n) and no division, so zeros are exact."""
    rank = len(op.block.var(op.input("X")[0]).shape)
    axes = axes_of(op, rank)
    axes = list(range(rank)) if axes is None else sorted(axes)
    kept = [a for a in range(rank) if a not in axes]
    back = np.argsort(kept + axes)

    def exclusive(flat):
        ones = np.ones(flat.shape[:-1] + (1,), flat.dtype)
        return np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1, dtype=flat.dtype)

    def run(x):
        moved = np.transpose(x, kept + axes)
        size = int(np.prod([x.shape[a] for a in axes]))
        if size == 0:
            return np.zeros_like(x)
        flat = moved.reshape(moved.shape[:len(kept)] + (size,))
        others = exclusive(flat) * np.flip(exclusive(np.flip(flat, -1)), -1)
        return np.transpose(others.reshape(moved.shape), back).copy(order="C")  # not ascontiguousarray: 0-d stays 0-d

    return run


KERNELS = {"prod_others": prod_others}
