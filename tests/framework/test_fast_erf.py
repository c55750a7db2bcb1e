"""The fast erf, gelu and gelu_grad kernels: float32 within one ulp of scipy's float32 erf over the whole real
line (special values included), with numba and without it; float64 is scipy's erf itself; dtypes kept."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import erf as scipy_erf

from gradgen.framework.backend.numpy import jit
from gradgen.framework.backend.numpy.compile_queue import wait_for_compiles
from gradgen.framework.backend.numpy.kernels import fast_erf
from tests.extras import require

SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1e-300, -1e-45, 1e-38, 3.9, -3.92, 4.0,
                    4.5, 30.0, -1e30, 1e300, -1e308])


def _whole_line(dtype) -> np.ndarray:
    """Dense where erf bends, geometric from the tiniest to the huge, both signs, and the special values."""
    rng = np.random.default_rng(0)
    tiny = np.finfo(dtype).smallest_subnormal
    magnitudes = np.concatenate([rng.uniform(0, 6, 400_000), np.geomspace(float(tiny), 1e30, 100_000)])
    with np.errstate(over="ignore"):
        return np.concatenate([magnitudes, -magnitudes, SPECIAL]).astype(dtype)


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in units of want's last place (NaN where both are NaN counts as 0)."""
    both_nan = np.isnan(got) & np.isnan(want)
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    return np.where(both_nan, 0.0, diff / np.spacing(np.abs(want)).astype(np.float64))


@pytest.fixture(params=["numba", "numpy"])
def path(request, monkeypatch):
    """Each float32 path: the compiled kernels (when numba is here; compiled first, off the run) and the numpy
    blocks."""
    if request.param == "numba":
        require(None if jit.AVAILABLE else "numba", "pip install gradgen[fast]")
        x = np.zeros(3, np.float32)
        fast_erf.erf(x), fast_erf.gelu(x), fast_erf.gelu_grad(x, x)  # ask for the kernels
        assert wait_for_compiles(timeout=300)
        x = np.ones(3, np.float32)  # the next calls find them ready
        fast_erf.erf(x), fast_erf.gelu(x), fast_erf.gelu_grad(x, x)
        assert all(fast_erf._LAZY[name].kernel is not None for name in ("erf", "gelu", "gelu_grad"))
    else:
        monkeypatch.setattr(fast_erf, "_compiled_kernel", lambda name, flats: None)
    return request.param


def test_the_first_call_never_waits_for_numba():
    require(None if jit.AVAILABLE else "numba", "pip install gradgen[fast]")
    fast_erf._LAZY.pop("erf", None)
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    got = fast_erf.erf(x)  # asks the worker for the kernel and returns the numpy blocks' result at once
    assert wait_for_compiles(timeout=300)
    np.testing.assert_array_equal(fast_erf.erf(x), got)  # the compiled kernel: the same float32 bits


def test_the_rational_is_within_its_stated_error_in_float64():
    z = np.concatenate([np.linspace(1e-6, 4.0, 200_001)[:-1], np.geomspace(1e-300, 1e-6, 1000)])
    relative = np.abs(fast_erf.erf_rational(z) / scipy_erf(z) - 1.0)
    assert relative.max() < 2.2e-9


def test_float32_erf_is_within_one_ulp_of_scipy_over_the_whole_line(path):
    x = _whole_line(np.float32)
    got, want = fast_erf.erf(x), scipy_erf(x)
    assert got.dtype == np.float32
    assert _ulps(got, want).max() <= 1.0
    with np.errstate(over="ignore"):  # the huge specials become +-inf in float32, as meant
        special = fast_erf.erf(SPECIAL.astype(np.float32))
    np.testing.assert_array_equal(special[:4], [0.0, -0.0, 1.0, -1.0])
    assert np.signbit(special[1]) and not np.signbit(special[0]) and np.isnan(special[4])


def test_float32_gelu_and_its_gradient_match_the_scipy_formulas(path):
    x = _whole_line(np.float32)[::7]
    x = x[np.abs(x) < 1e18]  # x * x overflows float32 beyond; the formulas below would compute it in float64
    dout = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    x64, d64 = x.astype(np.float64), dout.astype(np.float64)
    cdf = 0.5 * (1.0 + scipy_erf(x64 / math.sqrt(2.0)))
    want_gelu = x64 * cdf
    want_grad = d64 * (cdf + x64 * np.exp(-0.5 * x64 * x64) / math.sqrt(2.0 * math.pi))
    got_gelu, got_grad = fast_erf.gelu(x), fast_erf.gelu_grad(x, dout)
    assert got_gelu.dtype == got_grad.dtype == np.float32
    # within 2 ulp of the float64 value, or (where erf's float32 rounding of 1 - tiny cancels) 1e-7 absolute
    for got, want in ((got_gelu, want_gelu), (got_grad, want_grad)):
        close = _ulps(got, want.astype(np.float32)) <= 2.0
        assert np.all(close | (np.abs(got - want) <= 1e-7 * np.maximum(1.0, np.abs(want))))


def test_float64_is_scipys_erf_exactly():
    x = _whole_line(np.float64)
    np.testing.assert_array_equal(fast_erf.erf(x), scipy_erf(x))
    head = x[:1000]
    np.testing.assert_array_equal(fast_erf.gelu(head), head * (0.5 * (1.0 + scipy_erf(head / math.sqrt(2.0)))))


def test_float16_stays_float16_and_rounds_like_scipy(path):
    x = np.linspace(-5, 5, 2001).astype(np.float16)
    got = fast_erf.erf(x)
    assert got.dtype == np.float16 and fast_erf.gelu(x).dtype == np.float16
    np.testing.assert_array_equal(got, scipy_erf(x.astype(np.float32)).astype(np.float16))


def test_non_contiguous_and_empty_inputs(path):
    x = np.linspace(-3, 3, 60, dtype=np.float32).reshape(6, 10)[:, ::3]
    np.testing.assert_array_equal(fast_erf.erf(x), fast_erf.erf(np.ascontiguousarray(x)))
    assert fast_erf.gelu(np.zeros((0, 3), np.float32)).shape == (0, 3)
    assert fast_erf.gelu_grad(np.zeros((2, 0), np.float32), np.zeros((2, 0), np.float32)).shape == (2, 0)


def test_rank_0_inputs_give_rank_0_results_of_their_dtype(path):
    for dtype in (np.float16, np.float32, np.float64):
        x = np.asarray(0.5, dtype)
        for got in (fast_erf.erf(x), fast_erf.gelu(x), fast_erf.gelu_grad(x, np.asarray(2.0, dtype))):
            assert np.shape(got) == () and got.dtype == dtype
