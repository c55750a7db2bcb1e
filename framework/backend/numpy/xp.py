"""The array namespace the numpy engine hands to an op's ``compute`` (``OpSchema.compute``): numpy's functions,
plus ``erf`` (scipy's ufunc, in the input's dtype: scipy computes float16 in float32), ``pow`` with C99's
special cases (``design_docs/numerics.md``), ``check`` (``backend/derive``: raises at once) and ``einsum`` through
BLAS (``shared/contraction``)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy
from scipy.special import erf as _scipy_erf

from ..derive import check
from ..shared.contraction import reference_einsum

__all__ = ["XP"]


def _erf(x):
    return numpy.asarray(_scipy_erf(x)).astype(x.dtype, copy=False)


def _pow(x, y):
    """x ** y as C99's pow (Annex F). numpy computes a float to the power 0.5 as its square root (a fast path
    for an exponent that is one number, or a broadcast one), which gives NaN at -inf and -0 at -0 where pow gives
    +inf and +0; those two are put right, the rest is numpy's."""
    out = numpy.power(x, y)
    if out.dtype.kind != "f" or not out.size:
        return out
    half = numpy.asarray(y) == 0.5
    if not half.any():
        return out
    wrong = half & ((x == -numpy.inf) | (x == 0))
    if wrong.any():
        out = numpy.where(wrong, numpy.where(x == 0, 0, numpy.inf).astype(out.dtype), out)
    return out


XP = SimpleNamespace(**{**{name: getattr(numpy, name) for name in dir(numpy) if not name.startswith("_")},
                        "erf": _erf, "pow": _pow, "check": check, "einsum": reference_einsum})
"""numpy as ``xp``: a plain namespace, so each function is one attribute lookup away."""
