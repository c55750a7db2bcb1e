"""Matrix product kernels (numpy's matmul calls BLAS)."""
from __future__ import annotations

import numpy as np


def matmul(op):
    tx, ty = op.attr("transpose_x"), op.attr("transpose_y")
    if not tx and not ty:
        return np.matmul
    return lambda x, y: np.matmul(np.swapaxes(x, -1, -2) if tx else x, np.swapaxes(y, -1, -2) if ty else y)


KERNELS = {"matmul": matmul}
