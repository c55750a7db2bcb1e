"""Binary elementwise kernels: numpy ufuncs with numpy broadcasting."""
from __future__ import annotations

import numpy as np


def _ufunc(fn):
    return lambda op: fn


KERNELS = {
    "elementwise_add": _ufunc(np.add),
    "elementwise_sub": _ufunc(np.subtract),
    "elementwise_mul": _ufunc(np.multiply),
    "elementwise_div": _ufunc(np.divide),
    "elementwise_pow": _ufunc(np.power),
    "elementwise_max": _ufunc(np.maximum),
    "elementwise_min": _ufunc(np.minimum),
}
