"""Binary elementwise kernels: numpy ufuncs with numpy broadcasting.

Each kernel is the ufunc itself. The plan hands one a buffer only when the
buffer has the shape and dtype of both inputs (``signature.with_out``): no
broadcasting, one dtype. Anything else allocates.
"""
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
    "elementwise_mod": lambda op: np.fmod if op.attr("fmod") else np.mod,
}
