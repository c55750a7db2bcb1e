"""The lowering of the matrix product (``backend/numpy/kernels/linalg.py``): numpy's matmul, in full precision and
the declared dtype; einsum's is derived from its ``compute`` (``xla/xp.einsum``: full precision too)."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ...shared.attrs import out_dtype

__all__ = ["LOWERINGS"]


def _matmul(op, ctx):
    """numpy's matmul with the op's transposes (a 1-D operand is never transposed), in full precision."""
    tx, ty = op.attr("transpose_x"), op.attr("transpose_y")
    dtype = out_dtype(op)

    def run(x, y):
        a = jnp.swapaxes(x, -1, -2) if tx and x.ndim > 1 else x
        b = jnp.swapaxes(y, -1, -2) if ty and y.ndim > 1 else y
        return jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST).astype(dtype)

    return run


LOWERINGS = {"matmul": _matmul}
