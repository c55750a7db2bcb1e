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

With numba (``gradgen[fast]``) the same formulas, written out as generated
kernels over flat float32 arrays, are compiled off the run by the compile
worker (``compile_queue``), which a first call asks; until they are ready the
numpy blocks run, so no run waits the second numba takes to compile them.
"""
from __future__ import annotations

import math
from functools import partial

import numpy as np
from scipy.special import erf as scipy_erf

from .. import jit
from ..compile_queue import LazyKernel

__all__ = ["P_COEFFS", "Q_COEFFS", "BLOCK", "erf", "gelu", "gelu_grad", "erf_rational", "kernel_source"]

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


# The formulas, on float64 arrays (numpy); ``kernel_source`` writes the same ones out for numba.
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


def _expression(coeffs, t: str) -> str:
    """``_horner(coeffs, t)`` written out as one expression, the same operations in the same order."""
    acc = f"({t} * {coeffs[-1]!r} + {coeffs[-2]!r})"
    for c in coeffs[-3::-1]:
        acc = f"({acc} * {t} + {c!r})"
    return acc


_ERF64 = f"""

@numba.njit(cache=True, error_model="numpy", fastmath=False)
def erf64(z):
    c = z  # erf_rational's clip, NaN kept
    if c > 4.0:
        c = 4.0
    elif c < -4.0:
        c = -4.0
    t = c * c
    inside = 1.0 if abs(z) < 4.0 else 0.0
    return c * (0.25 + ({_expression(P_COEFFS, "t")} / {_expression(Q_COEFFS, "t")} - 0.25) * inside)
"""

_BODIES = {
    "erf": ("x", "erf64(np.float64(x[i]))"),
    "gelu": ("x", f"np.float64(x[i]) * (0.5 + 0.5 * erf64(np.float64(x[i]) * {_INV_SQRT2!r}))"),
    "gelu_grad": ("x, dout, gauss", f"np.float64(dout[i]) * (0.5 + 0.5 * erf64(np.float64(x[i]) * {_INV_SQRT2!r})"
                                    f" + np.float64(x[i]) * {_INV_SQRT_2PI!r} * np.float64(gauss[i]))"),
}
"""name -> (the kernel's array parameters, element i of the result in float64): the formulas above."""


def kernel_source(name: str) -> str:
    """The generated module whose ``kernel(*arrays, out)`` writes formula ``name`` over flat float32 arrays."""
    params, element = _BODIES[name]
    return (jit.module_head("float32") + f"def kernel({params}, out):\n    for i in range(out.size):\n"
            f"        out[i] = np.float32({element})\n" + _ERF64)


_LAZY: dict[str, LazyKernel] = {}


def _compiled_kernel(name: str, flats) -> object | None:
    """The compiled kernel ``name`` when the compile worker has it ready, else None (the first call asks for it;
    without numba there is none)."""
    lazy = _LAZY.get(name)
    if lazy is None:
        if not jit.AVAILABLE:
            return None
        lazy = _LAZY[name] = LazyKernel(partial(kernel_source, name), f"the fast float32 {name}", background=True)
        lazy.start(flats)
    return lazy.kernel if lazy.kernel is not None or lazy.pending is None else lazy.poll()


def _float32_path(name: str, formula, dtype: np.dtype, *arrays: np.ndarray) -> np.ndarray:
    """``formula`` on float32/float16 arrays: the compiled kernel on float32 when it is ready, else numpy blocks."""
    flats = [np.ravel(a.astype(np.float32, copy=False)) for a in arrays]
    out = np.empty(flats[0].size, np.float32)
    kernel = _compiled_kernel(name, (*flats, out))
    if kernel is not None:
        try:
            kernel(*flats, out)
            return out.reshape(arrays[0].shape).astype(dtype, copy=False)
        except TypeError:  # argument types it was not compiled for (a read-only view): numpy's blocks
            pass
    with np.errstate(invalid="ignore"):  # NaN inputs give NaN quietly, as scipy's erf does
        return _blockwise(formula, dtype, *arrays)


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
