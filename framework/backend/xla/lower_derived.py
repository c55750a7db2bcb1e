"""Lowerings derived from the ops' own math: every schema with a ``compute`` (``OpSchema.compute``) is traced
with ``xp = jax.numpy``, the numpy engine's formula exactly.

jax promotes differently from numpy (int32 / int32 is float32 in jax, float64 in numpy), so an op with one
numeric output computes in the dtype it declares: each input of another numeric dtype is cast to it first, and
the result is cast to it where it differs. A bool result (a comparison) compares its inputs as they are.
"""
from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from gradgen.program.schema import OpSchema

from .xp import XP

__all__ = ["derived_lowerings"]


def _lowering(schema: OpSchema) -> Callable:
    compute, attr_names = schema.compute, tuple(schema.attrs)

    def lowering(op, ctx) -> Callable:
        attrs = {name: op.attr(name) for name in attr_names}
        dtypes = [np.dtype(op.block.var(n).dtype) for n in op.output_arg_names]
        if len(dtypes) > 1:
            return lambda *xs: tuple(v.astype(d) for v, d in zip(compute(XP, *xs, **attrs), dtypes))
        (dtype,) = dtypes
        if dtype == np.bool_:
            return lambda *xs: compute(XP, *xs, **attrs).astype(dtype)
        return lambda *xs: compute(XP, *(x if x.dtype == dtype else x.astype(dtype) for x in xs),
                                   **attrs).astype(dtype)

    return lowering


def derived_lowerings(schemas: Mapping[str, OpSchema]) -> dict[str, Callable]:
    """op type -> a lowering tracing the op's ``compute`` on ``jax.numpy``, for every schema that has one."""
    return {t: _lowering(s) for t, s in schemas.items() if s.compute is not None}
