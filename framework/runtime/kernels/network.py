"""Kernels of dropout, lookup_table and batch_norm."""
from __future__ import annotations

import numpy as np

from .nn import first_out_of_range


def dropout(op):
    p, is_test = op.attr("p"), op.attr("is_test")
    # One stream per compiled plan: a fixed seed gives the same sequence of masks run after run.
    rng = np.random.Generator(np.random.PCG64(op.attr("seed")))

    def run(x):
        if is_test or p == 0.0:
            return x, np.ones_like(x)
        mask = ((rng.random(x.shape) >= p) / (1.0 - p)).astype(x.dtype)
        return x * mask, mask

    return run


def lookup_table(op):
    def run(w, ids):
        error = first_out_of_range(np.asarray(ids), w.shape[0], "id")  # numpy would read -1 as the last row
        if error is not None:
            raise error
        return np.take(w, ids, axis=0)

    return run


def batch_norm(op):
    momentum, eps, is_test = op.attr("momentum"), op.attr("epsilon"), op.attr("is_test")

    def run(x, scale, bias, mean, var):
        axes = (0,) + tuple(range(2, x.ndim))
        shape = (1, -1) + (1,) * (x.ndim - 2)
        if is_test or x.size == 0:
            # An empty batch tells nothing about the statistics: it normalizes (nothing) with the running ones
            # and leaves them as they were; its own (NaN) mean and variance would poison them for good.
            mu, v = mean, var
        else:
            mu, v = x.mean(axis=axes), x.var(axis=axes)
        y = (x - mu.reshape(shape)) / np.sqrt(v.reshape(shape) + eps) * scale.reshape(shape) + bias.reshape(shape)
        if is_test or x.size == 0:
            return y.astype(x.dtype, copy=False), mean, var
        new_mean = (momentum * mean + (1.0 - momentum) * mu).astype(mean.dtype, copy=False)
        new_var = (momentum * var + (1.0 - momentum) * v).astype(var.dtype, copy=False)
        return y.astype(x.dtype, copy=False), new_mean, new_var

    return run


KERNELS = {"dropout": dropout, "lookup_table": lookup_table, "batch_norm": batch_norm}
