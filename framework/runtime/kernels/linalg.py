"""Matrix product kernels (numpy's matmul calls BLAS)."""
from __future__ import annotations

import numpy as np


def matmul(op):
    tx, ty = op.attr("transpose_x"), op.attr("transpose_y")
    if not tx and not ty:
        return np.matmul
    return lambda x, y: np.matmul(np.swapaxes(x, -1, -2) if tx else x, np.swapaxes(y, -1, -2) if ty else y)


def matmul_into(op):
    """Two-dimensional products only: they are the big ones, and their result shape is cheap to check."""
    x, y = (op.block.var(op.input(slot)[0]) for slot in ("X", "Y"))
    if len(x.shape) != 2 or len(y.shape) != 2:
        return None
    tx, ty = op.attr("transpose_x"), op.attr("transpose_y")

    def run(x, y, buf):
        a, b = (x.T if tx else x), (y.T if ty else y)
        if buf is not None and buf.shape == (a.shape[0], b.shape[1]) and buf.dtype == a.dtype == b.dtype:
            return np.matmul(a, b, out=buf)
        return np.matmul(a, b)

    return run


KERNELS = {"matmul": matmul}
INTO = {"matmul": matmul_into}
