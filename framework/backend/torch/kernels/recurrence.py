"""The LSTM and GRU step by step on torch, with the cells' math written once (``program/ops/recurrence.py``, the
numpy reference's and the xla lowering's own): the kernels of the recurrences ATen's fused calls do not run as the
reference does (``recurrent``: an LSTM in float64, with sequence lengths or other activations; ONNX's
GRU without ``linear_before_reset``) and of the GRU's gradient where an output gradient is not finite (autograd's
derivative of ATen's cell forms dh' - dh' z, inf - inf, where the reference has dh' (1 - z)), and the tangent ops
(``lstm_jvp``, ``gru_jvp``): the forward and backward run on dual numbers (``program/ops/dual.py``), as the
reference's do.

A loop of ATen calls a step, forward and back, the gradient recomputing the forward (as the reference's does); the
products are numpy's (the reference's: MKL's parted from IEEE on special values, ``linalg``). The kernels
themselves, the lengths, the reverse direction and the padding are the reference's own
(``program/ops/recurrence_kernels.py``), over torch and its dual numbers.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Callable

import numpy as np
import torch

from gradgen.program.ops.dual import dual_ops
from gradgen.program.ops.recurrence_kernels import forward_kernel, gradient_kernel, tangent_kernel

from ..xp import XP

__all__ = ["stepwise_forward", "stepwise_gradient", "stepwise_tangent"]


def _product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.asarray(np.matmul(a.numpy(), b.numpy())))


_DUAL = dual_ops(SimpleNamespace(zeros_like=torch.zeros_like, zeros=lambda shape, like: like.new_zeros(shape),
                                 concat=torch.cat, stack=torch.stack, where=torch.where, matmul=_product,
                                 exp=torch.exp))
"""What the shared cell math and its loops ask of the engine, on tensors and duals: numpy's product (the
reference's), torch's concatenation, stack and select, zeros."""


def _as_it_is(values: list, x) -> list:
    return values


def stepwise_forward(op, cell: str) -> Callable:
    """The kernel of a ``lstm``/``gru`` op, step by step."""
    return forward_kernel(op, cell, XP, _DUAL, _as_it_is)


def stepwise_gradient(op, cell: str) -> Callable:
    """The kernel of a ``lstm_grad``/``gru_grad`` op, step by step: the forward again, then back through it."""
    return gradient_kernel(op, cell, XP, _DUAL, _as_it_is)


def stepwise_tangent(op, cell: str) -> Callable:
    """The kernel of a ``lstm_jvp``/``gru_jvp`` op, on dual numbers as the reference's."""
    return tangent_kernel(op, cell, XP, _DUAL, _as_it_is)
