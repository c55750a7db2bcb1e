"""Kernels of the creation family that are not derived from a compute: the seeded random samples, drawn as every
engine draws them (``shared/creation``: numpy's PCG64 on the host, on purpose, so every engine gives the same
numbers); and ``fill_constant`` and ``cast``, which state their math (``program/ops/creation.py``), kept here
where they measured faster (``FASTER``). The other fills and the copy are derived from their computes."""
from __future__ import annotations

import numpy as np

from ...shared.creation import random_draw

__all__ = ["FASTER", "KERNELS"]

_COPIED_CONSTANT = 64
"""Elements up to which ``fill_constant`` copies a value made once, rather than filling a new array."""


def fill_constant(op):
    """``np.full`` of the op's attrs (its compute), made once when small and copied each run (a fresh array each
    run, as ever): a loop's counter step or bound is made every iteration."""
    shape, dtype, value = tuple(op.attr("shape")), op.attr("dtype"), op.attr("value")
    if np.prod(shape, dtype=np.int64) <= _COPIED_CONSTANT:
        return np.full(shape, value, dtype=dtype).copy
    return lambda: np.full(shape, value, dtype=dtype)


def cast(op):
    """numpy's own conversion, which on x86 is the compute's answer everywhere (a float no integer holds becomes
    the most negative one; float64 rounds once to float16) in one pass where the compute takes several."""
    dtype = np.dtype(op.attr("out_dtype"))
    return lambda x: np.asarray(x).astype(dtype, copy=False)


KERNELS = {"fill_constant": fill_constant, "cast": cast, "uniform_random": random_draw,
           "gaussian_random": random_draw}

FASTER = {
    "fill_constant": "a copy of the value made once: 0.13 us a run for a [] or [8] constant, against the derived "
                     "np.full's 1.0 us (timeit, this machine); a while loop makes its step and bound every iteration",
    "cast": "one astype pass: float32 to int64 of 1e6 elements in 0.25 ms, the compute's range test and two wheres "
            "5.8 ms; float64 to float16 1.6 ms against the compute's round-to-odd 25 ms; a same-dtype cast 0.4 us "
            "against 1.5 us (timeit, this machine). On x86, where numpy converts a float no integer holds to the "
            "most negative integer, it gives the compute's numbers bit for bit (tests/framework/test_faster_kernels)",
}
"""op type -> why its kernel here stays beside the op's compute (``backend/derive.with_derived``)."""
