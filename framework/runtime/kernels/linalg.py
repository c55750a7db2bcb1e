"""Matrix product kernels (numpy's matmul calls BLAS)."""
from __future__ import annotations

import numpy as np


def matmul(op):
    """Two-dimensional products may write into a plan buffer: they are the big ones, and their result shape
    is cheap to check. Batched products always allocate."""
    tx, ty = op.attr("transpose_x"), op.attr("transpose_y")

    def product(x, y, *, out=None):
        a = np.swapaxes(x, -1, -2) if tx and x.ndim > 1 else x  # numpy: a 1-D operand is never transposed
        b = np.swapaxes(y, -1, -2) if ty and y.ndim > 1 else y
        if out is not None and not (a.ndim == b.ndim == 2 and out.shape == (a.shape[0], b.shape[1])
                                    and out.dtype == a.dtype == b.dtype):
            out = None
        return np.matmul(a, b, out=out)

    x, y = (op.block.var(op.input(slot)[0]) for slot in ("X", "Y"))
    if len(x.shape) == 2 and len(y.shape) == 2:
        return product
    return lambda x, y: product(x, y)


KERNELS = {"matmul": matmul}
