"""``gemm``: C = alpha op(A) op(B) + beta C in place, through one chosen BLAS, called by ctypes.

Every sizable product gradgen runs goes through one provider (``PROVIDER``):

- ``numpy`` (the default): the OpenBLAS bundled in numpy's wheel, already
  loaded. It is the pool numpy's own products use, so a user's numpy code and
  gradgen never keep two BLAS pools busy (on 2 cores, two pools busy-waiting
  against each other turned a 0.12 ms product into 6.5 ms; MKL's OpenMP pool
  next to numpy's OpenBLAS made the seed step 15-50x slower, measured);
- ``mkl``: Intel MKL from the ``mkl`` wheel (``pip install gradgen[mkl]``),
  chosen with ``GRADGEN_BLAS=mkl`` (read, never written) or ``use_blas("mkl")``.
  Measured 1.2-1.3x faster than numpy's OpenBLAS on the seed step's float64
  products with one thread, a tie in float32 (``design_docs/performance.md``);
  it picks AVX-512 kernels whatever ``OPENBLAS_CORETYPE`` says. For processes
  that do their products through gradgen only.

Where no provider is found (a numpy built against another BLAS), ``gemm`` is
None and callers use ``np.matmul``.

Threads follow the user. threadpoolctl sees a provider loaded here like any
other BLAS, so ``threadpool_limits(n)`` limits it too; and at load, unless
MKL's own variables (``MKL_NUM_THREADS``, ``OMP_NUM_THREADS``) say otherwise,
MKL gets the thread count numpy's BLAS has (``OPENBLAS_NUM_THREADS`` or its
default). No environment variable is ever written.
"""
from __future__ import annotations

import ctypes
import glob
import importlib.metadata
import os
from typing import Callable, NamedTuple

import numpy as np

__all__ = ["PROVIDER", "Provider", "gemm", "provider_threads", "use_blas"]

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


class Provider(NamedTuple):
    """A loaded CBLAS: its name, its ``?gemm`` functions by dtype, and its library (for thread queries)."""

    name: str
    gemm: dict
    lib: ctypes.CDLL
    path: str


def _declare(fns: dict, index_type) -> dict:
    for dtype, fn in fns.items():
        real = ctypes.c_double if dtype == np.float64 else ctypes.c_float
        vp = ctypes.c_void_p
        fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, index_type, index_type, index_type, real, vp,
                       index_type, vp, index_type, real, vp, index_type]
        fn.restype = None
    return fns


def _numpy_openblas() -> Provider | None:
    """The OpenBLAS bundled in numpy's wheel (64-bit indexes, ``scipy_`` symbol prefix), or None."""
    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs, "libscipy_openblas64_*.so"))):
        try:
            lib = ctypes.CDLL(path)
            fns = {np.dtype("float64"): lib.scipy_cblas_dgemm64_, np.dtype("float32"): lib.scipy_cblas_sgemm64_}
        except (OSError, AttributeError):
            continue
        return Provider("numpy", _declare(fns, ctypes.c_int64), lib, path)
    return None


def _mkl_path() -> str | None:
    try:
        files = importlib.metadata.files("mkl") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in files:
        if os.path.basename(str(f)).startswith("libmkl_rt.so"):
            return os.path.realpath(str(f.locate()))
    return None


def _mkl() -> Provider | None:
    """MKL's single dynamic library from the ``mkl`` wheel (32-bit indexes), or None when not installed."""
    path = _mkl_path()
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(path)
        fns = {np.dtype("float64"): lib.cblas_dgemm, np.dtype("float32"): lib.cblas_sgemm}
    except (OSError, AttributeError):
        return None
    lib.MKL_Get_Max_Threads.restype = ctypes.c_int
    if not (os.environ.get("MKL_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")):
        lib.MKL_Set_Num_Threads(ctypes.c_int(_numpy_blas_threads()))
    return Provider("mkl", _declare(fns, ctypes.c_int), lib, path)


def _numpy_blas_threads() -> int:
    """How many threads numpy's BLAS runs with now: what the user asked of it, or its default."""
    numpy_lib = _numpy_openblas()
    if numpy_lib is None:
        return os.cpu_count() or 1
    fn = numpy_lib.lib.scipy_openblas_get_num_threads64_
    fn.restype = ctypes.c_int
    return int(fn())


def provider_threads(provider: Provider) -> int:
    """The number of threads ``provider`` runs a large product with, as it stands now."""
    if provider.name == "mkl":
        return int(provider.lib.MKL_Get_Max_Threads())
    fn = provider.lib.scipy_openblas_get_num_threads64_
    fn.restype = ctypes.c_int
    return int(fn())


_LOADERS = {"numpy": _numpy_openblas, "mkl": _mkl}


def _choose(name: str) -> Provider | None:
    if name not in _LOADERS:
        raise ValueError(f"GRADGEN_BLAS / use_blas: unknown BLAS '{name}' (known: {', '.join(_LOADERS)})")
    return _LOADERS[name]() or (_numpy_openblas() if name != "numpy" else None)


PROVIDER: Provider | None = _choose(os.environ.get("GRADGEN_BLAS") or "numpy")
"""The BLAS every gradgen product runs on (None: numpy's matmul does them)."""


def use_blas(name: str) -> Provider | None:
    """Run gradgen's products on BLAS ``name`` ("numpy" or "mkl") from now on; numpy's when ``name`` is not
    installed. Returns the provider now in use."""
    global PROVIDER
    PROVIDER = _choose(name)
    return PROVIDER


def _operand(x: np.ndarray, trans: bool) -> tuple[np.ndarray, bool]:
    """``x`` as a C-contiguous array and whether BLAS must transpose it: a transposed view costs no copy."""
    if x.flags.c_contiguous:
        return x, trans
    if x.flags.f_contiguous:
        return x.T, not trans
    return np.ascontiguousarray(x), trans


def _gemm(trans_a: bool, trans_b: bool, alpha: float, a: np.ndarray, b: np.ndarray, beta: float,
          c: np.ndarray) -> np.ndarray:
    fn = PROVIDER.gemm[c.dtype]
    if a.dtype != c.dtype or b.dtype != c.dtype or not c.flags.c_contiguous:
        raise ValueError(f"gemm wants operands of C's dtype {c.dtype} and a C-contiguous C")
    m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
    kb, n = (b.shape[1], b.shape[0]) if trans_b else b.shape
    if k != kb or c.shape != (m, n):
        raise ValueError(f"gemm shapes do not agree: op(A) {m}x{k}, op(B) {kb}x{n}, C {c.shape}")
    if 0 in (m, n, k):  # BLAS wants leading dimensions of at least 1: numpy handles the empty cases
        c *= beta
        if m and n:
            c += alpha * ((a.T if trans_a else a) @ (b.T if trans_b else b))
        return c
    a, trans_a = _operand(a, trans_a)
    b, trans_b = _operand(b, trans_b)
    fn(_ROW_MAJOR, _TRANS if trans_a else _NO_TRANS, _TRANS if trans_b else _NO_TRANS, m, n, k, alpha,
       a.ctypes.data, a.shape[1], b.ctypes.data, b.shape[1], beta, c.ctypes.data, n)
    return c


gemm: Callable[..., np.ndarray] | None = _gemm if PROVIDER is not None else None
"""``gemm(trans_a, trans_b, alpha, a, b, beta, c)`` for 2-D float32/float64 arrays, writing C; None if unavailable."""
