"""Lowerings of the elementwise ops that do not state their math over ``xp`` (``backend/numpy/kernels/
elementwise.py``; the others are derived: ``derived``)."""
from __future__ import annotations

import jax.numpy as jnp

from ...shared.attrs import in_dtype, out_dtype

__all__ = ["LOWERINGS"]


def _mod(op, ctx):
    """numpy's remainder (floor, the divisor's sign) or, with ``fmod``, its truncated one; an integer remainder
    by zero fails the run, as the numpy kernel refuses it."""
    fn, dtype = (jnp.fmod if op.attr("fmod") else jnp.remainder), out_dtype(op)
    integer = in_dtype(op, "Y").kind in "iu"

    def run(x, y):
        if integer:
            ctx.check(jnp.all(y != 0), "ZeroDivisionError: integer remainder by zero")
            y = jnp.where(y == 0, jnp.ones((), y.dtype), y)  # the run fails; keep XLA's result defined meanwhile
        return fn(x, y).astype(dtype)

    return run


LOWERINGS = {"elementwise_mod": _mod}
