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


_SAMPLERS = {"uniform_random": ("uniform", "min", "max"), "gaussian_random": ("normal", "mean", "std")}
"""Random op type -> (the numpy Generator method, the attrs it takes in order)."""


def random_sample(op, generator: np.random.Generator) -> np.ndarray:
    """One sample of random op ``op`` drawn from ``generator``. PCG64 and its float streams are defined by numpy,
    not the platform: the same values everywhere."""
    method, *params = _SAMPLERS[op.type]
    drawn = getattr(generator, method)(*[op.attr(p) for p in params], size=tuple(op.attr("shape")))
    return drawn.astype(op.attr("dtype"), copy=False)


def random_stream(op) -> np.random.Generator:
    """The generator op ``op``'s ``seed`` starts."""
    return np.random.Generator(np.random.PCG64(op.attr("seed")))


def random_op(op):
    """A new generator every run (the same sample every run), or with ``redraw`` one generator per plan (a new
    sample every run, the same sequence from the same seed, as dropout's masks)."""
    if op.attr("redraw"):
        stream = random_stream(op)
        return lambda: random_sample(op, stream)
    return lambda: random_sample(op, random_stream(op))


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
    "fill_constant": fill_constant, "uniform_random": random_op, "gaussian_random": random_op,
    "fill_any_like": fill_any_like, "fill_zeros_like": fill_zeros_like, "assign": assign, "cast": cast,
}
