"""Kernels derived from the ops' own math (``backend/derive``): ``compute`` run with ``xp = numpy`` and the
engine's primitives (``kernels.XP``). The result is
cast to the dtype the op declares only where it differs, so a formula that keeps its input's dtype (all of them,
in numpy 2's promotion) costs no copy."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Callable

import numpy as np

from gradgen.program.schema import OpSchema

from ...derive import call_of
from .signature import KernelFactory

__all__ = ["derived_kernel"]


def _as(value, dtype: np.dtype) -> np.ndarray:
    value = np.asarray(value)
    return value if value.dtype == dtype else value.astype(dtype)


def derived_kernel(schema: OpSchema, xp: SimpleNamespace) -> KernelFactory:
    """The kernel factory of an op with a ``compute``, run over ``xp``."""
    compute = schema.compute

    def factory(op) -> Callable[..., np.ndarray]:
        attrs, dtypes, args, pick = call_of(schema, op)
        if args is None and pick is None and len(dtypes) == 1:  # most ops: nothing to arrange
            (dtype,) = dtypes
            return lambda *arrays: _as(compute(xp, *arrays, **attrs), dtype)

        def run(*arrays):
            result = compute(xp, *(arrays if args is None else args(arrays)), **attrs)
            result = result if pick is None else pick(result)
            return _as(result, dtypes[0]) if len(dtypes) == 1 else tuple(map(_as, result, dtypes))

        return run

    return factory
