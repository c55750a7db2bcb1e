"""Softmax in the torch engine on ATen's ``_softmax`` (``FASTER`` says why it stays beside the op's compute), the
compute where it would part from it."""
from __future__ import annotations

import torch

from gradgen.program.ops import OP_SCHEMAS
from gradgen.program.shapes import normalize_axis

from ..xp import XP
from .derived import derived_kernel
from .finite import all_finite, fused

__all__ = ["FASTER", "KERNELS"]

_aten = torch.ops.aten


def softmax(op):
    """ATen's ``_softmax`` (the same max-shifted exponentials, scaled by their sum); the compute for float16, an
    empty or 0-d X and one that is not finite (an infinity makes ATen's row and the compute's NaN in other places)."""
    axis = op.attr("axis")
    computed = derived_kernel(OP_SCHEMAS["softmax"], XP)(op)

    def run(x):
        if fused(x) and x.ndim and all_finite(x):
            return _aten._softmax(x, normalize_axis(axis, x.ndim), False)
        return computed(x)

    return run


KERNELS = {"softmax": softmax}

FASTER = {
    "softmax": "ATen's _softmax with the finiteness check took 0.63 ms on the transformer's attention scores [16, 4, "
               "128, 128] float32 over the last axis (two threads), the op's formulas 2.4-2.7",
}
"""op type -> why its kernel here stays beside the op's compute (``backend/derive.with_derived``)."""
