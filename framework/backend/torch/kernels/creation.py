"""Hand-written torch kernels of the creation family (``numpy/kernels/creation.py``): constants, fills,
the seeded draws (made on the host as every engine makes them) and casts."""
from __future__ import annotations

import numpy as np
import torch

from ...shared.creation import like_dtype, random_draw
from ..xp import torch_dtype

__all__ = ["KERNELS"]


def fill_constant(op):
    shape, dtype, value = tuple(op.attr("shape")), torch_dtype(op.attr("dtype")), op.attr("value")
    return lambda: torch.full(shape, value, dtype=dtype)


def fill_any_like(op):
    value, dtype = op.attr("value"), torch_dtype(like_dtype(op))
    return lambda x: torch.full(tuple(x.shape), value, dtype=dtype)


def fill_zeros_like(op):
    dtype = torch_dtype(like_dtype(op))
    return lambda x: torch.zeros(tuple(x.shape), dtype=dtype)


def drawn(op):
    """The seeded draw made on the host as every engine makes it (``shared/creation``): the same numbers."""
    draw = random_draw(op)
    return lambda: torch.from_numpy(np.ascontiguousarray(draw()))


def cast(op):
    dtype = torch_dtype(op.attr("out_dtype"))
    return lambda x: x.to(dtype)


KERNELS = {
    "fill_constant": fill_constant, "fill_any_like": fill_any_like, "fill_zeros_like": fill_zeros_like,
    "uniform_random": drawn, "gaussian_random": drawn, "assign": lambda op: (lambda x: x), "cast": cast,
}
