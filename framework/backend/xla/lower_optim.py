"""Lowerings of the optimizer updates and learning-rate schedules: the numpy kernels' formulas
(``backend/numpy/kernels/optimizer.py``, ``lr_schedule.py``) in ``jax.numpy``, in the parameter's dtype."""
from __future__ import annotations

import jax.numpy as jnp

__all__ = ["LOWERINGS"]


def _sgd(op, ctx):
    return lambda param, grad, lr: (param - grad * lr.reshape(())).astype(param.dtype)


LOWERINGS = {"sgd": _sgd}
