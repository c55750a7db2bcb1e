"""Selection and index kernels: int outputs, no gradients of their own (the comparisons and logical ops are
derived from their schemas' compute: ``derived``)."""
from __future__ import annotations

import numpy as np


def one_hot(op):
    depth, dtype = op.attr("depth"), np.dtype(op.attr("dtype"))

    def run(x):
        # Comparing against arange broadcasts to x.shape + [depth]; out-of-range ids give all-zero rows.
        return (np.expand_dims(x, -1) == np.arange(depth)).astype(dtype)

    return run


KERNELS = {

    "one_hot": one_hot,
}
