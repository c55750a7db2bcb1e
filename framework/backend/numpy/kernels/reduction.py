"""The reduction kernels that do not state their math over ``xp`` (the others are derived: ``derived``)."""
from __future__ import annotations

import numpy as np

from ...shared.reduction import axes_of


def logsumexp(op):
    rank = len(op.block.var(op.input("X")[0]).shape)
    axis, keep = axes_of(op, rank), op.attr("keep_dim")

    def run(x):
        top = np.max(x, axis=axis, keepdims=True, initial=-np.inf)  # initial: no elements give -inf, not an error
        top = np.where(np.isfinite(top), top, 0.0).astype(x.dtype, copy=False)  # all -inf (or inf) rows: no shift
        with np.errstate(divide="ignore"):  # log(0) = -inf is the answer over no elements (or all -inf)
            out = np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True)) + top
        return np.asarray(out if keep else np.squeeze(out, axis=axis), dtype=x.dtype)

    return run


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


KERNELS = {"logsumexp": logsumexp, "prod_others": prod_others}
