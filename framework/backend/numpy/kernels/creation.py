"""Kernels that make tensors: constants, seeded random samples (drawn as every engine draws them:
``shared/creation``), copies and casts."""
from __future__ import annotations

import numpy as np

from ...shared.creation import like_dtype, random_draw


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


def fill_any_like(op):
    value, dtype = op.attr("value"), like_dtype(op)
    return lambda x: np.full(np.shape(x), value, dtype=dtype)


def fill_zeros_like(op):
    dtype = like_dtype(op)
    return lambda x: np.zeros(np.shape(x), dtype=dtype)


def assign(op):
    # Arrays are never modified in place by kernels, so sharing is a valid copy.
    return lambda x: x


def cast(op):
    dtype = np.dtype(op.attr("out_dtype"))
    return lambda x: np.asarray(x).astype(dtype, copy=False)


KERNELS = {
    "fill_constant": fill_constant, "uniform_random": random_draw, "gaussian_random": random_draw,
    "fill_any_like": fill_any_like, "fill_zeros_like": fill_zeros_like, "assign": assign, "cast": cast,
}
