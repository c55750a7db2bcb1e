"""Lowerings derived from the ops' own math (``backend/derive``): ``compute`` traced with ``xp = jax.numpy`` and the
engine's primitives (``lowerings.XP``), the numpy engine's formula exactly.

jax promotes differently from numpy (int32 / int32 is float32 in jax, float64 in numpy), so an op with one numeric
output and all its inputs given computes in the dtype it declares: each input of another dtype is cast to it first
(but a float input of an op that declares an integer, an index: ``_keeps``; and an input of a slot that takes integers
only, ids, or of an op that takes its inputs as given: ``derive.uncast_inputs``), and the result is cast to it. A bool
result (a comparison) compares its inputs as they are; an op with several outputs or optional slots (layer norm)
states its own working dtype in its ``compute``.

A ``compute``'s ``xp.check(ok, error)`` (``backend/derive``) becomes a run-time check of the trace (``ctx.check``):
the compiled step reports the failed condition and the run fails with the error's words, as numpy's raises them.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Callable

import numpy as np

from gradgen.program.schema import OpSchema

from ...derive import call_of, uncast_inputs

__all__ = ["derived_lowering"]


def _keeps(dtype) -> Callable:
    """Whether an input stays as it is rather than take the declared ``dtype``: floats when the op declares an
    integer or bool (an index into its input, argmax's, is computed from the values as they are; cast first, NaN
    and inf became integers and the index went wrong)."""
    if np.issubdtype(dtype, np.floating):
        return lambda x: False
    return lambda x: np.issubdtype(x.dtype, np.floating)


class _Traced:
    """``xp`` for one op's trace: its functions, and ``check`` as a run-time check of the trace's context."""

    __slots__ = ("check", "xp")

    def __init__(self, xp: SimpleNamespace, ctx):
        self.xp = xp
        self.check = lambda ok, error, detail=None: ctx.check(ok, f"{type(error).__name__}: {error}")

    def __getattr__(self, name: str):
        return getattr(self.xp, name)


def derived_lowering(schema: OpSchema, xp: SimpleNamespace) -> Callable:
    """The lowering of an op with a ``compute``, traced over ``xp``."""
    compute = schema.compute

    def lowering(op, ctx) -> Callable:
        attrs, dtypes, args, pick = call_of(schema, op)
        traced = _Traced(xp, ctx)
        if len(dtypes) > 1 or args is not None or pick is not None:
            def run(*xs):
                result = compute(traced, *(xs if args is None else args(xs)), **attrs)
                result = result if pick is None else pick(result)
                return result.astype(dtypes[0]) if len(dtypes) == 1 else tuple(
                    v.astype(d) for v, d in zip(result, dtypes))

            return run
        (dtype,) = dtypes
        if dtype == np.bool_:
            return lambda *xs: compute(traced, *xs, **attrs).astype(dtype)
        keeps, uncast = _keeps(dtype), uncast_inputs(schema, op)
        return lambda *xs: compute(traced, *(x if x.dtype == dtype or keeps(x) or k in uncast else x.astype(dtype)
                                         for k, x in enumerate(xs)), **attrs).astype(dtype)

    return lowering
