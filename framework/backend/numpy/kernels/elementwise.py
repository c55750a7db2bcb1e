"""Binary elementwise kernels: numpy ufuncs with numpy broadcasting.

Each kernel is the ufunc itself.
"""
from __future__ import annotations

import numpy as np


def _ufunc(fn):
    return lambda op: fn


def _mod(fn):
    """A remainder kernel: an integer divisor of zero is an error (numpy would warn and give 0, a silent wrong
    answer); floats give NaN there, as numpy's and IEEE's rule is."""
    def run(x, y):
        if y.dtype.kind in "iu" and not np.all(y):
            raise ZeroDivisionError("integer remainder by zero")
        return fn(x, y)
    return run


KERNELS = {
    "elementwise_add": _ufunc(np.add),
    "elementwise_sub": _ufunc(np.subtract),
    "elementwise_mul": _ufunc(np.multiply),
    "elementwise_div": _ufunc(np.divide),
    "elementwise_pow": _ufunc(np.power),
    "elementwise_max": _ufunc(np.maximum),
    "elementwise_min": _ufunc(np.minimum),
    "elementwise_mod": lambda op: _mod(np.fmod if op.attr("fmod") else np.mod),
}
