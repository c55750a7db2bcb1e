"""Matrix product kernels: 2-D float products through the chosen BLAS (``runtime.blas``) when it is not numpy's
own (then ``np.matmul`` is the same library, called more cheaply); the rest by numpy. The provider is read
when a plan builds the kernel: ``use_blas`` applies to plans built afterwards."""
from __future__ import annotations

import numpy as np

from .. import blas

_BLAS_DTYPES = (np.dtype("float32"), np.dtype("float64"))


def _gemm_product(tx: bool, ty: bool):
    """``fn(x, y, *, out=None)`` for 2-D operands: the provider's GEMM when both are float32/float64 of one
    dtype and the product is big enough for a thread pool (``blas.SMALL_PRODUCT``), so that every such product
    runs on one pool."""
    def product(x, y, *, out=None):
        a = x.T if tx else x
        b = y.T if ty else y
        m, k = a.shape
        n = b.shape[1]
        dtype = a.dtype
        if dtype != b.dtype or dtype not in _BLAS_DTYPES or m * n * k <= blas.SMALL_PRODUCT or k != b.shape[0]:
            if out is not None and not (out.shape == (m, n) and out.dtype == dtype == b.dtype):
                out = None
            return np.matmul(a, b, out=out)
        if out is None or out.shape != (m, n) or out.dtype != dtype or not out.flags.c_contiguous:
            out = np.empty((m, n), dtype)
        return blas.gemm(tx, ty, 1.0, x, y, 0.0, out)

    return product


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
        # numpy's matmul already calls numpy's own OpenBLAS, without ctypes' few microseconds per call
        other_blas = blas.PROVIDER is not None and blas.PROVIDER.name != "numpy"
        return _gemm_product(tx, ty) if other_blas else product
    return lambda x, y: product(x, y)


KERNELS = {"matmul": matmul}
