"""Binary elementwise kernels: numpy ufuncs with numpy broadcasting.

They write into a plan buffer only in the common case of no broadcasting and
one dtype (X, Y and the buffer alike); anything else allocates.
"""
from __future__ import annotations

import numpy as np

from .signature import fits


def _ufunc(ufunc):
    def factory(op):
        def run(x, y, *, out=None):
            if out is None or not fits(out, x, y):
                return ufunc(x, y)  # no out=None: on tiny arrays the keyword costs as much as the op
            return ufunc(x, y, out=out)

        return run

    return factory


KERNELS = {
    "elementwise_add": _ufunc(np.add),
    "elementwise_sub": _ufunc(np.subtract),
    "elementwise_mul": _ufunc(np.multiply),
    "elementwise_div": _ufunc(np.divide),
    "elementwise_pow": _ufunc(np.power),
    "elementwise_max": _ufunc(np.maximum),
    "elementwise_min": _ufunc(np.minimum),
}
