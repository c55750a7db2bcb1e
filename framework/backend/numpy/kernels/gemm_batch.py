"""``gemm_batch``: a batch of matrix products, some of them summed, written into one output array.

Convolutions lower to many products of one shape (per image, per group).
The large ones go one by one to the BLAS gradgen chose (``backend.numpy.blas``), as
every sizable product does; small ones, or all of them when that BLAS is
numpy's own, go to one ``np.matmul`` call over the whole batch, which loops in C.
"""
from __future__ import annotations

import numpy as np

from .. import blas

__all__ = ["gemm_batch"]



def _on_provider(dtype, m: int, n: int, k: int) -> bool:
    provider = blas.PROVIDER
    return (provider is not None and provider.name != "numpy" and dtype in blas.GEMM_DTYPES
            and m * n * k > blas.SMALL_PRODUCT)


def gemm_batch(a: np.ndarray, b: np.ndarray, out: np.ndarray, *, trans_b: bool = False,
               accumulate: bool = False) -> np.ndarray:
    """``out[j] (+)= sum over i of a[i, j] @ op(b[i, j])``; returns ``out``.

    ``a`` is [..., m, k] and ``b`` [..., k, n] ([..., n, k] with ``trans_b``);
    their leading dims broadcast to (I..., J...), where J... are the leading
    dims of ``out`` ([J..., m, n], C-contiguous, of a's dtype) and the I...
    in front are summed over. ``accumulate`` adds to ``out`` instead of
    overwriting it.
    """
    lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    summed = len(lead) - (out.ndim - 2)
    m, k = a.shape[-2:]
    n = b.shape[-2] if trans_b else b.shape[-1]
    if not _on_provider(out.dtype, m, n, k):
        product = np.matmul(a, np.swapaxes(b, -1, -2) if trans_b else b)
        if summed:
            product = product.sum(axis=tuple(range(summed)))
        if accumulate:
            out += product
        else:
            out[...] = product
        return out
    a_all = np.broadcast_to(a, lead + a.shape[-2:])
    b_all = np.broadcast_to(b, lead + b.shape[-2:])
    for at in np.ndindex(*lead):
        beta = 1.0 if accumulate or any(at[:summed]) else 0.0
        blas.gemm(False, trans_b, 1.0, a_all[at], b_all[at], beta, out[at[summed:]])
    if 0 in lead[:summed] and not accumulate:  # an empty sum: no product wrote anything
        out[...] = 0
    return out
