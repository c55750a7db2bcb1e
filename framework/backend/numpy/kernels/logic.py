"""Selection and index kernels: int outputs, no gradients of their own (the comparisons and logical ops are
derived from their schemas' compute: ``derived``)."""
from __future__ import annotations

import numpy as np


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

    "argmax": argmax,
    "argmin": argmin,
    "one_hot": one_hot,
}
