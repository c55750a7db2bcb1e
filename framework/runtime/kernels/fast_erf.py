"""erf, the exact gelu and its gradient, fast for float32 (and float16) and exact to scipy for float64.

scipy's erf ufunc costs about 40 ns an element on float32 (it computes in
float64 through a library call per element): on a transformer's FFN it was a
sixth of the step. For float32 and float16 inputs these kernels instead
evaluate a rational function, with numpy's vectorized arithmetic, in float64:

    erf(z) = z * P(z^2) / Q(z^2)  for |z| < 4,   sign(z) for |z| >= 4 (erfc(4) = 1.5e-8 rounds away)

P of degree 6 and Q of degree 5 (``P_COEFFS``, ``Q_COEFFS``) were fitted to
erf(z)/z on z^2 in [0, 16] by iteratively reweighted least squares against
scipy's float64 erf (a Lawson-style minimax iteration); their largest
relative error there is 2.1e-9, far below float32's half-ulp of 6e-8, so the
float32 result is scipy's float32 erf to within one ulp. The work goes in
blocks of ``BLOCK`` elements, so the float64 temporaries stay in cache and no
temporary the size of the input is ever allocated (fresh large arrays cost
page faults). float64 inputs keep scipy's erf: a rational this short is not
exact to float64's ulp.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import erf as scipy_erf

from .. import jit

__all__ = ["P_COEFFS", "Q_COEFFS", "BLOCK", "erf", "gelu", "gelu_grad", "erf_rational"]

P_COEFFS = (1.1283791693781597, 0.18520331229796635, 0.054316901469123234, 0.00384961241973291,
            0.0003796079070336751, 4.684749351745334e-06, -1.3202089396357313e-08)
"""P(t) = sum P_COEFFS[k] t^k, lowest order first; P(0) = 2 / sqrt(pi)."""
Q_COEFFS = (1.0, 0.4974655758845859, 0.11395843414635261, 0.015462088329341555, 0.001307568766031311,
            6.311031451084315e-05)
"""Q(t) = sum Q_COEFFS[k] t^k, lowest order first."""

BLOCK = 16384
"""Elements per block: a few float64 temporaries of this size fit in L2 cache."""

_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


# The formulas, on float64 scalars (numba) or float64 arrays (numpy) alike. ``_compiled`` registers them with
# numba (importing it only then) so that the float32 ufuncs can call them.
def _horner(coeffs, t):
    acc = t * coeffs[-1] + coeffs[-2]
    for c in coeffs[-3::-1]:
        acc = acc * t + c
    return acc


def erf_rational(z):
    """erf of float64 ``z`` by the rational above, exactly +-1 beyond |z| = 4 (so gelu(-huge) is -0, not -huge
    * 1e-8). NaN stays NaN."""
    clipped = np.minimum(np.maximum(z, -4.0), 4.0)
    t = clipped * clipped
    inside = np.abs(z) < 4.0  # else clipped is +-4 and the factor 1/4 gives +-1; -0.0 and NaN pass through
    return clipped * (0.25 + (_horner(P_COEFFS, t) / _horner(Q_COEFFS, t) - 0.25) * inside)


def _gelu64(x):
    return x * (0.5 + 0.5 * erf_rational(x * _INV_SQRT2))


def _gelu_grad64(x, dout, gauss):
    # dout * (Phi(x) + x * phi(x)), phi(x) = gauss / sqrt(2 pi): the caller's exp(-x^2 / 2) in float32 (numpy's
    # exp is vectorized there; numba's is a call per element), whose rounding stays below the result's
    return dout * (0.5 + 0.5 * erf_rational(x * _INV_SQRT2) + x * _INV_SQRT_2PI * gauss)


def _fast(dtype: np.dtype) -> bool:
    return dtype == np.float32 or dtype == np.float16


def _blockwise(fn, out_dtype: np.dtype, *arrays: np.ndarray) -> np.ndarray:
    """``fn`` applied to float64 blocks of the flattened (same-shaped) ``arrays``, written into one result."""
    shape = arrays[0].shape
    flats = [np.ravel(a) for a in arrays]
    result = np.empty(flats[0].size, dtype=out_dtype)
    for start in range(0, result.size, BLOCK):
        stop = start + BLOCK
        result[start:stop] = fn(*(f[start:stop].astype(np.float64) for f in flats))
    return result.reshape(shape)


def _erf32(x):
    return erf_rational(np.float64(x))


def _gelu32(x):
    return _gelu64(np.float64(x))


def _gelu_grad32(x, dout, gauss):
    return _gelu_grad64(np.float64(x), np.float64(dout), np.float64(gauss))


def _compiled() -> dict:
    """The formulas as numba ufuncs from float32 to float32 (computing in float64); empty without numba."""
    if not jit.AVAILABLE:
        return {}
    import numba
    from numba.extending import register_jitable

    for formula in (_horner, erf_rational, _gelu64, _gelu_grad64):
        register_jitable(formula)  # callable from jitted code; the function itself stays as it is

    return {"erf": numba.vectorize(["float32(float32)"], cache=True)(_erf32),
            "gelu": numba.vectorize(["float32(float32)"], cache=True)(_gelu32),
            "gelu_grad": numba.vectorize(["float32(float32, float32, float32)"], cache=True)(_gelu_grad32)}


_UFUNCS: dict = {}


def _ufunc(name: str):
    """The compiled ufunc ``name`` (compiled on first use), or None without numba."""
    if not _UFUNCS and jit.AVAILABLE:
        _UFUNCS.update(_compiled())
    return _UFUNCS.get(name)


def _float32_path(name: str, formula, dtype: np.dtype, *arrays: np.ndarray) -> np.ndarray:
    """``formula`` on float32/float16 arrays: the numba ufunc on float32 when there is one, else numpy blocks."""
    compiled = _ufunc(name)
    with np.errstate(invalid="ignore"):  # NaN inputs give NaN quietly, as scipy's erf does
        if compiled is None:
            return _blockwise(formula, dtype, *arrays)
        return np.asarray(compiled(*(a.astype(np.float32, copy=False) for a in arrays)), dtype=dtype)


def erf(x: np.ndarray) -> np.ndarray:
    """erf elementwise, in x's dtype."""
    if _fast(x.dtype):
        return _float32_path("erf", erf_rational, x.dtype, x)
    return scipy_erf(x)


def gelu(x: np.ndarray) -> np.ndarray:
    """x * Phi(x), Phi the standard normal CDF, in x's dtype."""
    if _fast(x.dtype):
        return _float32_path("gelu", _gelu64, x.dtype, x)
    return (x * (0.5 * (1.0 + scipy_erf(x / math.sqrt(2.0))))).astype(x.dtype, copy=False)


def gelu_grad(x: np.ndarray, dout: np.ndarray) -> np.ndarray:
    """dout * (Phi(x) + x phi(x)), gelu's derivative times the incoming gradient, in dout's dtype."""
    if _fast(x.dtype) and x.shape == dout.shape:
        x32 = x.astype(np.float32, copy=False)
        gauss = np.empty_like(x32)  # an array even for rank 0, where ufuncs return scalars
        np.square(x32, out=gauss)
        gauss *= np.float32(-0.5)
        np.exp(gauss, out=gauss)
        return _float32_path("gelu_grad", _gelu_grad64, dout.dtype, x32, dout, gauss)
    cdf = 0.5 * (1.0 + scipy_erf(x / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return (dout * (cdf + x * pdf)).astype(dout.dtype, copy=False)
