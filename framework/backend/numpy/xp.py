"""The array namespace the numpy engine hands to an op's ``compute`` (``OpSchema.compute``): numpy's functions,
plus ``erf`` (scipy's ufunc, in the input's dtype: scipy computes float16 in float32)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy
from scipy.special import erf as _scipy_erf

__all__ = ["XP"]


def _erf(x):
    return numpy.asarray(_scipy_erf(x)).astype(x.dtype, copy=False)


XP = SimpleNamespace(**{name: getattr(numpy, name) for name in dir(numpy) if not name.startswith("_")}, erf=_erf)
"""numpy as ``xp``: a plain namespace, so each function is one attribute lookup away."""
