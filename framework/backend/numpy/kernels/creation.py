"""Kernels that make tensors: constants, seeded random samples, copies and casts."""
from __future__ import annotations

import numpy as np


_COPIED_CONSTANT = 64
"""Elements up to which ``fill_constant`` copies a value made once, rather than filling a new array."""


def fill_constant(op):
    """A loop's counter step or bound is made every iteration: ``np.full`` takes ~2 us, a copy of the same
    small array 0.13 us (a fresh array each run, as ever)."""
    shape, dtype, value = tuple(op.attr("shape")), op.attr("dtype"), op.attr("value")
    if all(d >= 0 for d in shape) and np.prod(shape, dtype=np.int64) <= _COPIED_CONSTANT:
        made = np.full(shape, value, dtype=dtype)
        return made.copy
    return lambda: np.full(shape, value, dtype=dtype)


def _random(method: str, *params: str):
    """A kernel factory calling the generator's ``method`` with the op's ``params`` attrs, seeded by its seed."""
    def factory(op):
        shape, dtype, seed = tuple(op.attr("shape")), op.attr("dtype"), op.attr("seed")
        args = [op.attr(p) for p in params]
        # PCG64 and its float streams are defined by numpy, not the platform: same values everywhere.
        return lambda: getattr(np.random.Generator(np.random.PCG64(seed)), method)(*args, size=shape).astype(
            dtype, copy=False)

    return factory


uniform_random = _random("uniform", "min", "max")
gaussian_random = _random("normal", "mean", "std")


def _out_dtype(op):
    return op.attr("dtype") or op.block.var(op.input("X")[0]).dtype


def fill_any_like(op):
    value, dtype = op.attr("value"), _out_dtype(op)
    return lambda x: np.full(np.shape(x), value, dtype=dtype)


def fill_zeros_like(op):
    dtype = _out_dtype(op)
    return lambda x: np.zeros(np.shape(x), dtype=dtype)


def assign(op):
    # Arrays are never modified in place by kernels, so sharing is a valid copy.
    return lambda x: x


def cast(op):
    dtype = np.dtype(op.attr("out_dtype"))
    return lambda x: np.asarray(x).astype(dtype, copy=False)


KERNELS = {
    "fill_constant": fill_constant, "uniform_random": uniform_random, "gaussian_random": gaussian_random,
    "fill_any_like": fill_any_like, "fill_zeros_like": fill_zeros_like, "assign": assign, "cast": cast,
}
