"""framework.blas.gemm against numpy, for every transpose combination, both float types and empty batches."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework.backend.numpy.blas import gemm


@pytest.mark.parametrize("dtype,rtol", [("float64", 1e-12), ("float32", 1e-5)])
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_gemm_accumulates_alpha_times_the_product_onto_c(dtype, rtol, ta, tb):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((7, 5) if ta else (5, 7)).astype(dtype)
    b = rng.standard_normal((4, 7) if tb else (7, 4)).astype(dtype)
    c = rng.standard_normal((5, 4)).astype(dtype)
    want = -0.25 * ((a.T if ta else a) @ (b.T if tb else b)) + 0.5 * c
    got = gemm(ta, tb, -0.25, a, b, 0.5, c)
    assert got is c
    np.testing.assert_allclose(c, want, rtol=rtol, atol=rtol)


def test_gemm_with_an_empty_inner_dimension_only_scales_c():
    c = np.ones((3, 2))
    gemm(True, False, -0.5, np.ones((0, 3)), np.ones((0, 2)), 1.0, c)
    np.testing.assert_array_equal(c, np.ones((3, 2)))


def test_gemm_rejects_disagreeing_shapes_and_dtypes():
    with pytest.raises(ValueError, match="shapes"):
        gemm(False, False, 1.0, np.ones((2, 3)), np.ones((4, 2)), 0.0, np.ones((2, 2)))
    with pytest.raises(ValueError, match="dtype"):
        gemm(False, False, 1.0, np.ones((2, 3), "float32"), np.ones((3, 2)), 0.0, np.ones((2, 2)))
