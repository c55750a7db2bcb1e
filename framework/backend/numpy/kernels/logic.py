"""Comparison, selection and index kernels: bool and int outputs, no gradients of their own."""
from __future__ import annotations

import numpy as np


def _fixed(fn):
    return lambda op: fn


def where(op):
    return lambda cond, x, y: np.where(cond, x, y)


def _arg_extreme(pick):
    def factory(op):
        rank = len(op.block.var(op.input("X")[0]).shape)
        axis, keep = op.attr("axis") % max(rank, 1), op.attr("keep_dim")

        def run(x):
            out = pick(x, axis=axis)  # the first index on ties
            # a scalar has no dim to keep: its argmax is the 0-d index 0, as declared
            return (np.expand_dims(out, axis) if keep and x.ndim else np.asarray(out)).astype(np.int64, copy=False)

        return run

    return factory


argmax = _arg_extreme(np.argmax)
argmin = _arg_extreme(np.argmin)


def one_hot(op):
    depth, dtype = op.attr("depth"), np.dtype(op.attr("dtype"))

    def run(x):
        # Comparing against arange broadcasts to x.shape + [depth]; out-of-range ids give all-zero rows.
        return (np.expand_dims(x, -1) == np.arange(depth)).astype(dtype)

    return run


KERNELS = {
    "where": where,
    "less_than": _fixed(np.less),
    "less_equal": _fixed(np.less_equal),
    "greater_than": _fixed(np.greater),
    "greater_equal": _fixed(np.greater_equal),
    "equal": _fixed(np.equal),
    "not_equal": _fixed(np.not_equal),
    "logical_and": _fixed(np.logical_and),
    "logical_or": _fixed(np.logical_or),
    "logical_xor": _fixed(np.logical_xor),
    "logical_not": _fixed(np.logical_not),
    "argmax": argmax,
    "argmin": argmin,
    "one_hot": one_hot,
}
