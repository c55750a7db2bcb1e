"""The chosen BLAS provider: products equal numpy's to rounding, threads follow the user's limits."""
from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

from gradgen.framework.backend.numpy import blas
from gradgen.framework.backend.numpy.kernels import KERNELS
from gradgen.program import Program, layers, program_guard
from tests.extras import require

TOL = {np.float64: 1e-12, np.float32: 2e-5}


def _matmul_op(shape_x, shape_y, dtype, tx, ty):
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", list(shape_x), dtype)
        y = layers.data("y", list(shape_y), dtype)
        layers.matmul(x, y, transpose_x=tx, transpose_y=ty)
    return main.global_block().ops[-1]


def test_mkl_is_the_default_on_intel_cpus_where_installed_and_numpy_is_chosen_on_request():
    require(None if blas._mkl_path() else "the mkl wheel", "pip install gradgen[mkl]")
    default = "mkl" if blas._intel_cpu() and not blas._torch_installed() else "numpy"  # (performance.md)
    assert blas.PROVIDER is not None and blas.PROVIDER.name == default
    a, b = np.random.default_rng(0).standard_normal((2, 128, 128))
    try:
        assert blas.use_blas("numpy").name == "numpy"
        np.testing.assert_allclose(blas.gemm(False, True, 1.0, a, b, 0.0, np.empty((128, 128))), a @ b.T, rtol=1e-12)
        assert blas.use_blas("mkl").name == "mkl"  # asked for by name: MKL on any CPU
    finally:
        assert blas.use_blas("auto").name == default
    with pytest.raises(ValueError, match="unknown BLAS 'blis'"):
        blas.use_blas("blis")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("tx", [False, True])
@pytest.mark.parametrize("ty", [False, True])
@pytest.mark.parametrize("m,k,n", [(64, 100, 10), (3, 50, 40), (1, 4096, 1), (33, 1, 65),  # numpy's matmul
                                   (130, 70, 40), (1, 300_000, 1), (600, 1, 520)])         # the provider
def test_gemm_equals_numpy_to_rounding(dtype, tx, ty, m, k, n, provider):
    rng = np.random.default_rng(m * k + n)
    a = rng.standard_normal((k, m) if tx else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if ty else (k, n)).astype(dtype)
    c = rng.standard_normal((m, n)).astype(dtype)
    want = -0.5 * ((a.T if tx else a) @ (b.T if ty else b)) + 2.0 * c
    got = blas.gemm(tx, ty, -0.5, a, b, 2.0, c.copy())
    np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype] * np.abs(want).max())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_transposed_views_and_strided_operands_cost_no_wrong_answer(dtype, provider):
    rng = np.random.default_rng(1)
    a = np.asfortranarray(rng.standard_normal((400, 300)).astype(dtype))   # an F-ordered operand: read as A^T
    b = rng.standard_normal((600, 500)).astype(dtype)[::2, ::2]           # neither C nor F: copied
    c = np.empty((400, 250), dtype)
    want = a @ b  # sums of 300 products: entries near zero get a large relative error, so the scale sets atol
    np.testing.assert_allclose(blas.gemm(False, False, 1.0, a, b, 0.0, c), want, rtol=TOL[dtype] * 10,
                               atol=TOL[dtype] * np.abs(want).max())


@pytest.fixture(params=["numpy", "mkl"])
def provider(request):
    """Kernels built while each provider is chosen (mkl only where its wheel is installed)."""
    require(None if request.param == "numpy" or blas._mkl_path() else "the mkl wheel", "pip install gradgen[mkl]")
    blas.use_blas(request.param)
    yield request.param
    blas.use_blas("auto")


def test_mixed_and_integer_products_stay_with_numpy():
    fn = KERNELS["matmul"](_matmul_op((20, 30), (30, 10), "int64", False, False))
    x = np.arange(600, dtype=np.int64).reshape(20, 30)
    y = np.arange(300, dtype=np.int64).reshape(30, 10)
    np.testing.assert_array_equal(fn(x, y), x @ y)


@pytest.mark.parametrize("shape_x,shape_y", [((0, 5), (5, 3)), ((4, 0), (0, 3)), ((4, 5), (5, 0))])
def test_empty_products(shape_x, shape_y):
    x, y = np.ones(shape_x), np.ones(shape_y)
    np.testing.assert_array_equal(blas.gemm(False, False, 1.0, x, y, 0.0, np.full((shape_x[0], shape_y[1]), 7.0)),
                                  x @ y)


@pytest.mark.parametrize("name", ["numpy", "mkl"])
def test_threadpool_limits_reach_the_provider(name):
    require(None if importlib.util.find_spec("threadpoolctl") else "threadpoolctl", "pip install gradgen[fast]")
    require(None if name == "numpy" or blas._mkl_path() else "the mkl wheel", "pip install gradgen[mkl]")
    threadpoolctl = importlib.import_module("threadpoolctl")
    try:
        provider = blas.use_blas(name)
        before = blas.provider_threads(provider)
        with threadpoolctl.threadpool_limits(1):
            assert blas.provider_threads(provider) == 1
        assert blas.provider_threads(provider) == before
    finally:
        blas.use_blas("auto")


def test_a_prepared_product_writes_nothing_until_called(provider):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((200, 300)), rng.standard_normal((300, 100))
    c = rng.standard_normal((200, 100))
    before = c.copy()
    write = blas.prepare_gemm(False, False, -0.25, a, b, 1.0, c)
    np.testing.assert_array_equal(c, before)
    assert write() is c
    np.testing.assert_allclose(c, before - 0.25 * (a @ b), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="shapes do not agree"):
        blas.prepare_gemm(False, False, 1.0, a, b.T, 1.0, c)
    np.testing.assert_allclose(c, before - 0.25 * (a @ b), rtol=1e-12, atol=1e-12)


def test_a_bad_operand_is_refused_not_miscomputed():
    with pytest.raises(ValueError, match="shapes do not agree"):
        blas.gemm(False, False, 1.0, np.ones((3, 4)), np.ones((5, 2)), 0.0, np.empty((3, 2)))
    with pytest.raises(ValueError, match="dtype"):
        blas.gemm(False, False, 1.0, np.ones((3, 4), np.float32), np.ones((4, 2)), 0.0, np.empty((3, 2)))


def test_with_torch_installed_the_default_blas_loads_no_other_openmp_runtime():
    """MKL's Intel OpenMP runtime, loaded before torch (gradgen's numpy engine first, torch in ``backend="auto"``'s
    preparation), answers torch's OpenMP calls and slows the torch engine: with torch installed, "auto" loads no
    MKL. A fresh process, as a user's would start."""
    require(None if importlib.util.find_spec("torch") else "torch", "pip install -e '.[oracle]'")
    code = ("from gradgen.framework.backend.numpy import blas\n"
            "print(blas.PROVIDER.name if blas.PROVIDER else None)\n"
            "print(any('libiomp5' in line or 'libmkl' in line for line in open('/proc/self/maps')))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "GRADGEN_BLAS"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["numpy", "False"]
