"""Kernels of the fused recurrent ops (lstm, gru), their gradients (``*_grad``) and their tangents (``*_jvp``):
``program/ops/recurrence_kernels.py``'s, written once for the engines that run the cells step by step, here over
numpy and its dual numbers (``recurrence.DUAL``), each result cast to X's dtype."""
from __future__ import annotations

import numpy as np

from gradgen.program.ops.recurrence_kernels import forward_kernel, gradient_kernel, tangent_kernel
from gradgen.program.ops.recurrent import PARAMS

from ..xp import XP
from .recurrence import DUAL

__all__ = ["KERNELS"]


def _cast(values: list, x) -> list:
    return [np.asarray(v).astype(x.dtype, copy=False) for v in values]


def _kernel(make, cell: str):
    return lambda op: make(op, cell, XP, DUAL, _cast)


KERNELS = {**{c: _kernel(forward_kernel, c) for c in PARAMS},
           **{f"{c}_grad": _kernel(gradient_kernel, c) for c in PARAMS},
           **{f"{c}_jvp": _kernel(tangent_kernel, c) for c in PARAMS}}
