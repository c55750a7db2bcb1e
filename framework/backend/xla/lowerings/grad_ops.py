"""Lowerings of the fused grad ops that do not state their math over ``xp`` (``backend/numpy/kernels/grad_ops.py``;
the others are derived: ``derived``), computing what those kernels compute."""
from __future__ import annotations

import jax.numpy as jnp

from ...shared.manipulation import slice_index
from .indexing import in_range, scatter_rows

__all__ = ["LOWERINGS"]


def _slice_grad(op, ctx):
    axes, starts, ends, strides = op.attr("axes"), op.attr("starts"), op.attr("ends"), op.attr("strides")

    def run(x, dout):
        return jnp.zeros(x.shape, dout.dtype).at[slice_index(x.shape, axes, starts, ends, strides)].set(dout)

    return run


def _gather_grad(op, ctx):
    axis = op.attr("axis")

    def run(x, index, dout):
        index = in_range(ctx, index, x.shape[axis % x.ndim], "gather_grad")
        return scatter_rows(jnp.zeros(x.shape, dout.dtype), index, dout, axis, add=True)

    return run


LOWERINGS = {"slice_grad": _slice_grad, "gather_grad": _gather_grad}
