"""Lowerings derived from the ops' own math (``backend/derive``): ``compute`` traced with ``xp = jax.numpy``, the
numpy engine's formula exactly.

jax promotes differently from numpy (int32 / int32 is float32 in jax, float64 in numpy), so an op with one
numeric output computes in the dtype it declares: each input of another numeric dtype is cast to it first, and
the result is cast to it where it differs. A bool result (a comparison) compares its inputs as they are.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from gradgen.program.schema import OpSchema

from ..derive import call_of
from .xp import XP

__all__ = ["derived_lowering"]


def derived_lowering(schema: OpSchema) -> Callable:
    """The lowering of an op with a ``compute``."""
    compute = schema.compute

    def lowering(op, ctx) -> Callable:
        attrs, dtypes = call_of(schema, op)
        if len(dtypes) > 1:
            return lambda *xs: tuple(v.astype(d) for v, d in zip(compute(XP, *xs, **attrs), dtypes))
        (dtype,) = dtypes
        if dtype == np.bool_:
            return lambda *xs: compute(XP, *xs, **attrs).astype(dtype)
        return lambda *xs: compute(XP, *(x if x.dtype == dtype else x.astype(dtype) for x in xs),
                                   **attrs).astype(dtype)

    return lowering
