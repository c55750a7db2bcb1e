"""Kernels of the learning-rate schedules in ``program/ops/lr_schedule.py`` (the step counter is derived
from its compute: ``derived``)."""
from __future__ import annotations

import math

import numpy as np


def _step(s) -> int:
    return int(np.asarray(s).reshape(()))


def piecewise_decay(op):
    boundaries, values, dtype = op.attr("boundaries"), op.attr("values"), op.attr("dtype")

    def run(step):
        s = _step(step)
        return np.asarray(values[sum(1 for b in boundaries if s >= b)], dtype=dtype)

    return run


def exponential_decay(op):
    lr, steps, rate, stair, dtype = (op.attr("learning_rate"), op.attr("decay_steps"), op.attr("decay_rate"),
                                     op.attr("staircase"), op.attr("dtype"))

    def run(step):
        exponent = _step(step) / steps
        return np.asarray(lr * rate ** (math.floor(exponent) if stair else exponent), dtype=dtype)

    return run


def cosine_decay(op):
    lr, per_epoch, epochs, dtype = (op.attr("learning_rate"), op.attr("step_each_epoch"), op.attr("epochs"),
                                    op.attr("dtype"))

    def run(step):
        epoch = _step(step) // per_epoch
        return np.asarray(lr * 0.5 * (math.cos(epoch * math.pi / epochs) + 1.0), dtype=dtype)

    return run


def linear_lr_warmup(op):
    warmup, start, end = op.attr("warmup_steps"), op.attr("start_lr"), op.attr("end_lr")

    def run(step, lr):
        s = _step(step)
        if s < warmup:
            return np.asarray(start + (end - start) * s / warmup, dtype=lr.dtype)
        return np.asarray(lr, dtype=lr.dtype).reshape(())

    return run


KERNELS = {"piecewise_decay": piecewise_decay, "exponential_decay": exponential_decay,
           "cosine_decay": cosine_decay, "linear_lr_warmup": linear_lr_warmup}
