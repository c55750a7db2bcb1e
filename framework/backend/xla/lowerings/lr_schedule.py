"""Lowerings of the learning-rate schedules (``backend/numpy/kernels/lr_schedule.py``; the step counter is
derived): the numpy kernels' formulas in ``jax.numpy``. The schedules read the step as an integer and compute in
float64 before the cast to their dtype, as the kernels do."""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

__all__ = ["LOWERINGS"]


def _step(step):
    return step.reshape(())


def _piecewise_decay(op, ctx):
    boundaries, values, dtype = op.attr("boundaries"), op.attr("values"), np.dtype(op.attr("dtype"))
    table = np.asarray(values, dtype=dtype)

    def run(step):
        s = _step(step)
        return jnp.asarray(table)[sum((s >= b).astype(np.int64) for b in boundaries) if boundaries else 0]

    return run


def _exponential_decay(op, ctx):
    lr, steps, rate, stair, dtype = (op.attr("learning_rate"), op.attr("decay_steps"), op.attr("decay_rate"),
                                     op.attr("staircase"), np.dtype(op.attr("dtype")))

    def run(step):
        exponent = _step(step).astype(np.float64) / steps
        return (lr * jnp.power(np.float64(rate), jnp.floor(exponent) if stair else exponent)).astype(dtype)

    return run


def _cosine_decay(op, ctx):
    lr, per_epoch, epochs, dtype = (op.attr("learning_rate"), op.attr("step_each_epoch"), op.attr("epochs"),
                                    np.dtype(op.attr("dtype")))

    def run(step):
        epoch = jnp.floor_divide(_step(step).astype(np.int64), per_epoch)
        return (lr * 0.5 * (jnp.cos(epoch * math.pi / epochs) + 1.0)).astype(dtype)

    return run


def _linear_lr_warmup(op, ctx):
    warmup, start, end = op.attr("warmup_steps"), op.attr("start_lr"), op.attr("end_lr")

    def run(step, lr):
        s = _step(step).astype(np.int64)
        ramp = (start + (end - start) * s.astype(np.float64) / warmup).astype(lr.dtype)
        return jnp.where(s < warmup, ramp, lr.reshape(()))

    return run


LOWERINGS = {
    "piecewise_decay": _piecewise_decay, "exponential_decay": _exponential_decay,
    "cosine_decay": _cosine_decay, "linear_lr_warmup": _linear_lr_warmup,
}
