"""Matrix product kernels, all on the chosen BLAS (``backend.numpy.blas``) where it is not numpy's own (then
``np.matmul`` is the same library, called more cheaply):

- 2-D products, and ``x[..., k] @ y[k, n]`` with x not transposed, whose batch dims fold into the rows of one
  matrix (a reshape: a view when x is contiguous): ONE 2-D GEMM;
- true batched products (attention's ``[b, h, s, d] @ [b, h, d, s]``, batch dims broadcast): one batched
  GEMM call (``blas.gemm_batch``);
- products with a 1-D operand: numpy.

The provider is read when a plan builds the kernel: ``use_blas`` applies to plans built afterwards.
"""
from __future__ import annotations

import math

import numpy as np

from gradgen.program.einsum_equation import parse_einsum

from .. import blas
from .signature import result_array



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
        if dtype != b.dtype or dtype not in blas.GEMM_DTYPES or m * n * k <= blas.SMALL_PRODUCT or k != b.shape[0]:
            if out is not None and not (out.shape == (m, n) and out.dtype == dtype == b.dtype):
                out = None
            return np.matmul(a, b, out=out)
        out = result_array(out, (m, n), dtype)
        return blas.gemm(tx, ty, 1.0, x, y, 0.0, out)

    return product


def _numpy_product(tx: bool, ty: bool):
    """``fn(x, y, *, out=None)`` on numpy's matmul, writing ``out`` when it is the 2-D result's array."""
    def product(x, y, *, out=None):
        if ty and not tx and x.ndim == 2 and y.ndim == 2:
            return blas.product_nt(x, y, out)  # kept off OpenBLAS's thread pool where it can be
        a = np.swapaxes(x, -1, -2) if tx and x.ndim > 1 else x  # numpy: a 1-D operand is never transposed
        b = np.swapaxes(y, -1, -2) if ty and y.ndim > 1 else y
        if out is not None and not (a.ndim == b.ndim == 2 and out.shape == (a.shape[0], b.shape[1])
                                    and out.dtype == a.dtype == b.dtype):
            out = None
        return np.matmul(a, b, out=out)

    return product


def _folded(matrix_product):
    """``x[..., k] @ y`` as ``matrix_product`` of x's rows ``[prod(...), k]`` and y, written into ``out`` through
    a 2-D view of it when ``out`` fits (then ``out`` is returned), reshaped back to ``[..., n]`` otherwise."""
    def product(x, y, *, out=None):
        rows = x.reshape(math.prod(x.shape[:-1]), x.shape[-1])  # not -1: x may have no elements
        flat = None
        if out is not None and out.ndim == x.ndim and out.shape[:-1] == x.shape[:-1] and out.flags.c_contiguous:
            flat = out.reshape(rows.shape[0], out.shape[-1])
        result = matrix_product(rows, y, out=flat)
        if flat is not None and result is flat:
            return out
        return result.reshape(x.shape[:-1] + result.shape[-1:])

    return product


def _batched_product(tx: bool, ty: bool, fallback):
    """``fn(x, y, *, out=None)`` for operands of rank >= 2 with batch dims: one ``blas.gemm_batch`` call when
    both are float32/float64 of one dtype and their shapes agree, ``fallback`` (numpy, which says what is
    wrong) otherwise."""
    def product(x, y, *, out=None):
        dtype = x.dtype
        k = x.shape[-2] if tx else x.shape[-1]
        if dtype != y.dtype or dtype not in blas.GEMM_DTYPES or k != (y.shape[-1] if ty else y.shape[-2]):
            return fallback(x, y)
        try:
            batch = np.broadcast_shapes(x.shape[:-2], y.shape[:-2])
        except ValueError:
            return fallback(x, y)
        shape = batch + (x.shape[-1] if tx else x.shape[-2], y.shape[-2] if ty else y.shape[-1])
        return blas.gemm_batch(tx, ty, x, y, result_array(out, shape, dtype))

    return product


def matmul(op):
    """Every product but one with a 1-D operand may write into a plan buffer: products are the big arrays."""
    tx, ty = op.attr("transpose_x"), op.attr("transpose_y")
    x, y = (op.block.var(op.input(slot)[0]) for slot in ("X", "Y"))
    # numpy's matmul already calls numpy's own OpenBLAS, without ctypes' few microseconds per call
    other_blas = blas.PROVIDER is not None and blas.PROVIDER.name != "numpy"
    numpy_product = _numpy_product(tx, ty)
    if len(y.shape) == 2 and len(x.shape) >= 2 and (len(x.shape) == 2 or not tx):
        matrix_product = _gemm_product(tx, ty) if other_blas else numpy_product
        return matrix_product if len(x.shape) == 2 else _folded(matrix_product)
    if len(x.shape) >= 2 and len(y.shape) >= 2 and other_blas and blas.PROVIDER.gemm_batch is not None:
        return _batched_product(tx, ty, numpy_product)
    return lambda x, y: numpy_product(x, y)


def einsum(op):
    """numpy's einsum on the equation with its ellipsis spelled out (``program/einsum_equation.py``); with
    ``optimize`` numpy contracts pairs through BLAS instead of one loop over every index."""
    ranks = [len(op.block.var(n).shape) for n in op.input("Operands")]
    equation = parse_einsum(op.attr("equation"), ranks).text()
    return lambda *xs: np.asarray(np.einsum(equation, *xs, optimize=len(xs) > 1))


KERNELS = {"matmul": matmul, "einsum": einsum}
