"""The remainder's kernel. The other binary elementwise ops state their math in ``program/ops/elementwise.py``
and their kernels are derived from it (``derived``); the remainder checks an integer divisor first."""
from __future__ import annotations

import numpy as np


def _mod(fn):
    """A remainder kernel: an integer divisor of zero is an error (numpy would warn and give 0, a silent wrong
    answer); floats give NaN there, as numpy's and IEEE's rule is."""
    def run(x, y):
        if y.dtype.kind in "iu" and not np.all(y):
            raise ZeroDivisionError("integer remainder by zero")
        return fn(x, y)
    return run


KERNELS = {
    "elementwise_mod": lambda op: _mod(np.fmod if op.attr("fmod") else np.mod),
}
