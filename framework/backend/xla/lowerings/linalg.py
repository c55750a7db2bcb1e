"""Lowerings of the products (``backend/numpy/kernels/linalg.py``): numpy's matmul and einsum, in full precision
and the declared dtype."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from gradgen.program.einsum_equation import parse_einsum

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


def _einsum(op, ctx):
    """numpy's einsum on the equation with its ellipsis spelled out (``program/einsum_equation.py``)."""
    ranks = [len(op.block.var(n).shape) for n in op.input("Operands")]
    equation, dtype = parse_einsum(op.attr("equation"), ranks).text(), out_dtype(op)
    return lambda *xs: jnp.einsum(equation, *xs, precision=jax.lax.Precision.HIGHEST).astype(dtype)


LOWERINGS = {"matmul": _matmul, "einsum": _einsum}
