"""``gemm``: C = alpha op(A) op(B) + beta C in place, through the BLAS numpy itself uses.

numpy has no GEMM with beta, and ``scipy.linalg.blas`` ships its own
OpenBLAS whose worker threads busy-wait after each call: on a machine with
few cores, alternating scipy and numpy products makes the two thread pools
fight (measured on 2 cores: numpy's 64x1000x100 product went from 0.12 ms to
over 6 ms right after scipy calls). So this module calls the CBLAS entry point
of the OpenBLAS library bundled with numpy's wheel, which is already loaded,
through ctypes: one thread pool for every product. Where that library cannot
be found, ``gemm`` is None and callers do without it.
"""
from __future__ import annotations

import ctypes
import glob
import os
from typing import Callable

import numpy as np

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


def _numpy_cblas() -> dict | None:
    """numpy's bundled CBLAS gemm functions by dtype, or None (not a wheel with a bundled OpenBLAS)."""
    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs, "libscipy_openblas64_*.so"))):
        try:
            lib = ctypes.CDLL(path)
            fns = {np.dtype("float64"): lib.scipy_cblas_dgemm64_, np.dtype("float32"): lib.scipy_cblas_sgemm64_}
        except (OSError, AttributeError):
            continue
        i64, vp = ctypes.c_int64, ctypes.c_void_p
        for dtype, fn in fns.items():
            real = ctypes.c_double if dtype == np.float64 else ctypes.c_float
            fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, i64, i64, i64, real, vp, i64, vp, i64, real, vp,
                           i64]
            fn.restype = None
        return fns
    return None


_CBLAS = _numpy_cblas()


def _gemm(trans_a: bool, trans_b: bool, alpha: float, a: np.ndarray, b: np.ndarray, beta: float,
          c: np.ndarray) -> np.ndarray:
    fn = _CBLAS[c.dtype]
    if a.dtype != c.dtype or b.dtype != c.dtype or not c.flags.c_contiguous:
        raise ValueError(f"gemm wants operands of C's dtype {c.dtype} and a C-contiguous C")
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
    kb, n = (b.shape[1], b.shape[0]) if trans_b else b.shape
    if k != kb or c.shape != (m, n):
        raise ValueError(f"gemm shapes do not agree: op(A) {m}x{k}, op(B) {kb}x{n}, C {c.shape}")
    if 0 in (m, n, k):  # BLAS wants leading dimensions of at least 1: numpy handles the empty cases
        c *= beta
        if m and n:
            c += alpha * ((a.T if trans_a else a) @ (b.T if trans_b else b))
        return c
    fn(_ROW_MAJOR, _TRANS if trans_a else _NO_TRANS, _TRANS if trans_b else _NO_TRANS, m, n, k, alpha,
       a.ctypes.data, a.shape[1], b.ctypes.data, b.shape[1], beta, c.ctypes.data, n)
    return c


gemm: Callable[..., np.ndarray] | None = _gemm if _CBLAS is not None else None
"""``gemm(trans_a, trans_b, alpha, a, b, beta, c)`` for 2-D float32/float64 arrays, writing C; None if unavailable."""
