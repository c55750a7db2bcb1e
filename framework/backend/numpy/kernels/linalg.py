"""The matrix product kernel on numpy's ``matmul`` (numpy's BLAS does the work); einsum's is derived from its
``compute`` (``derived``), over ``xp.einsum`` (``numpy/xp``: through BLAS).

``x[..., k] @ y[k, n]`` with x not transposed folds x's batch dims into the rows of one matrix (a reshape, a
view when x is contiguous) and makes ONE 2-D product: numpy's matmul would otherwise loop over the batch in
small products. The result is a new array the kernel keeps no reference to.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["KERNELS"]


def _folded(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x[..., k] @ y[k, n]`` as one product of x's rows ``[prod(...), k]`` and y."""
    rows = x.reshape(math.prod(x.shape[:-1]), x.shape[-1])  # not -1: x may have no elements
    return np.matmul(rows, y).reshape(x.shape[:-1] + (y.shape[-1],))


def matmul(op):
    """x @ y, either operand transposed in its last two dims as the attrs say (a 1-D operand never is)."""
    tx, ty = op.attr("transpose_x"), op.attr("transpose_y")
    x, y = (op.block.var(op.input(slot)[0]) for slot in ("X", "Y"))
    if len(x.shape) > 2 and len(y.shape) == 2 and not tx:
        return (lambda a, b: _folded(a, b.T)) if ty else _folded

    def product(a, b):
        a = np.swapaxes(a, -1, -2) if tx and a.ndim > 1 else a
        b = np.swapaxes(b, -1, -2) if ty and b.ndim > 1 else b
        return np.matmul(a, b)

    return product


KERNELS = {"matmul": matmul}
