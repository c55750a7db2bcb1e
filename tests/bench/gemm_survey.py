"""Time the bench's GEMM shapes through one BLAS provider: ``python -m tests.bench.gemm_survey PROVIDER [REPS] [SIZE]``.

How ``backend.numpy.blas`` was chosen (``design_docs/performance.md``, *Choosing the GEMM*): run it once per provider,
each in a fresh process, in rounds, on a quiet machine, and compare the medians it prints as JSON (µs per
product and for the five together). Providers: ``numpy`` (``np.matmul``), ``mkl`` (the ``mkl`` wheel, by
ctypes), ``cmeel`` (the ``cmeel-openblas`` wheel PyTensor's C backend links; it needs ``libgfortran.so.5`` on
the library path), ``scipy-openblas64`` and ``blis`` (the ``blis`` wheel). None of them is a gradgen dependency
except through the ``mkl`` extra.
"""
from __future__ import annotations

import ctypes
import importlib.metadata
import json
import os
import sys
import time

import numpy as np

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
SIZES = {"seed": (64, 1000, 100, 10), "large": (512, 4096, 4096, 1000)}


def _library(package: str, prefix: str) -> str:
    for f in importlib.metadata.files(package) or []:
        if os.path.basename(str(f)).startswith(prefix):
            return str(f.locate())
    raise FileNotFoundError(f"{package} has no {prefix}*")


def _cblas(provider: str):
    """(dgemm, sgemm, index type) of a CBLAS loaded by ctypes."""
    if provider == "mkl":
        lib, names, index = ctypes.CDLL(_library("mkl", "libmkl_rt.so")), ("cblas_dgemm", "cblas_sgemm"), ctypes.c_int
    elif provider == "cmeel":
        lib, names, index = (ctypes.CDLL(_library("cmeel-openblas", "libopenblas.so")), ("cblas_dgemm", "cblas_sgemm"),
                             ctypes.c_int)
    elif provider == "scipy-openblas64":
        lib = ctypes.CDLL(_library("scipy-openblas64", "libscipy_openblas64_"))
        names, index = ("scipy_cblas_dgemm64_", "scipy_cblas_sgemm64_"), ctypes.c_int64
    else:
        raise ValueError(f"unknown provider {provider}")
    fns = []
    for name, real in zip(names, (ctypes.c_double, ctypes.c_float)):
        fn = getattr(lib, name)
        fn.argtypes = [ctypes.c_int] * 3 + [index] * 3 + [real, ctypes.c_void_p, index, ctypes.c_void_p, index,
                                                          real, ctypes.c_void_p, index]
        fn.restype = None
        fns.append(fn)
    return {np.dtype("float64"): fns[0], np.dtype("float32"): fns[1]}


def _gemm_function(provider: str):
    """``gemm(trans_a, trans_b, a, b, c)``: C = op(A) op(B) through ``provider``."""
    if provider == "numpy":
        return lambda ta, tb, a, b, c: np.matmul(a.T if ta else a, b.T if tb else b, out=c)
    if provider == "blis":
        import blis.py

        return lambda ta, tb, a, b, c: blis.py.gemm(a, b, out=c, trans1=ta, trans2=tb, alpha=1.0, beta=0.0)
    fns = _cblas(provider)

    def gemm(ta, tb, a, b, c):
        m, k = (a.shape[1], a.shape[0]) if ta else a.shape
        n = b.shape[0] if tb else b.shape[1]
        fns[c.dtype](_ROW_MAJOR, _TRANS if ta else _NO_TRANS, _TRANS if tb else _NO_TRANS, m, n, k, 1.0,
                     a.ctypes.data, a.shape[1], b.ctypes.data, b.shape[1], 0.0, c.ctypes.data, n)
    return gemm


def _products(n: int, d_in: int, h: int, d_out: int, dtype) -> dict:
    """The step's five products: (trans_a, trans_b, A, B, C)."""
    rng = np.random.default_rng(0)
    x, w1 = rng.standard_normal((n, d_in)).astype(dtype), rng.standard_normal((d_in, h)).astype(dtype)
    w2, hid = rng.standard_normal((h, d_out)).astype(dtype), rng.standard_normal((n, h)).astype(dtype)
    g = rng.standard_normal((n, d_out)).astype(dtype)
    return {"x@w1": (False, False, x, w1, np.empty((n, h), dtype)),
            "h@w2": (False, False, hid, w2, np.empty((n, d_out), dtype)),
            "hT@g": (True, False, hid, g, np.empty((h, d_out), dtype)),
            "g@w2T": (False, True, g, w2, np.empty((n, h), dtype)),
            "xT@dh": (True, False, x, hid, np.empty((d_in, h), dtype))}


def survey(provider: str, reps: int, size: str) -> dict:
    gemm = _gemm_function(provider)
    out: dict = {"provider": provider}
    for dtype in (("float64", "float32") if size == "seed" else ("float32",)):
        cases = _products(*SIZES[size], dtype)
        for _ in range(3):
            for args in cases.values():
                gemm(*args)
        per = {k: [] for k in cases}
        total = []
        for _ in range(reps):
            begin = time.perf_counter()
            for k, args in cases.items():
                start = time.perf_counter()
                gemm(*args)
                per[k].append(time.perf_counter() - start)
            total.append(time.perf_counter() - begin)
        ta, tb, a, b, c = cases["xT@dh"]
        want = (a.T if ta else a) @ (b.T if tb else b)
        out[dtype] = {"five_us": round(float(np.median(total)) * 1e6, 1),
                      "each_us": {k: round(float(np.median(v)) * 1e6, 1) for k, v in per.items()},
                      "max_rel_error": float(np.max(np.abs(c - want)) / np.max(np.abs(want)))}
    return out


if __name__ == "__main__":
    args = sys.argv[1:]
    print(json.dumps(survey(args[0], int(args[1]) if len(args) > 1 else 300, args[2] if len(args) > 2 else "seed")))
