"""Lowerings of the selecting ops that do not state their math over ``xp`` (``backend/numpy/kernels/logic.py``; the
comparisons and logical ops are derived: ``derived``): ``where``, ``argmax``/``argmin`` and ``one_hot``."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ...shared.attrs import out_dtype, rank_of

__all__ = ["LOWERINGS"]


def _arg_extreme(pick):
    def factory(op, ctx):
        rank = rank_of(op)
        axis, keep = op.attr("axis") % max(rank, 1), op.attr("keep_dim")

        def run(x):
            if x.ndim == 0:  # numpy's argmax of a scalar along axis 0 is 0
                out = jnp.zeros((), np.int64)
            else:
                out = pick(x, axis=axis).astype(np.int64)  # the first index on ties, as numpy
            return jnp.expand_dims(out, axis) if keep and x.ndim else out  # a scalar has no dim to keep

        return run

    return factory


def _one_hot(op, ctx):
    depth, dtype = op.attr("depth"), np.dtype(op.attr("dtype"))
    return lambda x: (jnp.expand_dims(x, -1) == jnp.arange(depth)).astype(dtype)  # out-of-range ids: zero rows


LOWERINGS = {"argmax": _arg_extreme(jnp.argmax), "argmin": _arg_extreme(jnp.argmin),
             "one_hot": _one_hot}
