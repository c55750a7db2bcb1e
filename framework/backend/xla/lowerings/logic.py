"""Lowerings of the selecting ops that do not state their math over ``xp`` (``backend/numpy/kernels/logic.py``; the
comparisons, logical ops, ``where``, ``argmax`` and ``argmin`` are derived: ``derived``): ``one_hot``."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ...shared.attrs import out_dtype, rank_of

__all__ = ["LOWERINGS"]


def _one_hot(op, ctx):
    depth, dtype = op.attr("depth"), np.dtype(op.attr("dtype"))
    return lambda x: (jnp.expand_dims(x, -1) == jnp.arange(depth)).astype(dtype)  # out-of-range ids: zero rows


LOWERINGS = {"one_hot": _one_hot}
