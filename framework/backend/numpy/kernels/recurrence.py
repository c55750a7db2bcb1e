"""The LSTM and GRU recurrences in numpy, forward and backward through time, for plain arrays and for dual
numbers: the cells' math and its loops are ``program/ops/recurrence.py``'s (written once for every engine), run
here with numpy's product, concatenation and select on arrays and duals (``DUAL``, ``program/ops/dual.py``).

One direction of one layer, time-major: X is ``[T, N, I]``, the state ``[N, H]`` (the gate layout:
``recurrence``). The gates' activations are data (``activation(name, alpha, beta)``): ONNX's set, each written once
over ``xp`` with its slope in ``ops.recurrent.ACTIVATIONS``.

``Dual`` (value, tangent) runs the same code forward-mode: the forward pass on duals gives the Jacobian of
the outputs applied to the inputs' tangents, and the backward pass on duals gives the tangent of the
gradients, i.e. the Hessian of ``<dOutputs, Outputs>`` applied to the tangents (plus the Jacobian's
transpose applied to the dOutputs' tangents). Those are the second-order gradients the ``*_jvp`` ops return.

With sequence lengths, steps at or past a sequence's length leave its state unchanged and output zero
(ONNX's rule); ``mask[t]`` is 1.0 where step t is inside the sequence. The reverse direction walks each
sequence from its own last step back to its first (``reverse_index``).
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from gradgen.program.ops.dual import Dual, dual_ops, value
from gradgen.program.ops.recurrence import gate_activation

from ..xp import XP

__all__ = ["DUAL", "Dual", "activation", "reverse_index", "sequence_mask", "value"]

DUAL = dual_ops(SimpleNamespace(zeros_like=np.zeros_like, zeros=lambda shape, like: np.zeros(shape, like.dtype),
                                concat=np.concatenate, stack=np.stack, where=np.where, matmul=np.matmul, exp=np.exp))
"""What the shared cell math (``program/ops/recurrence``) asks of the engine, on arrays and duals: numpy's product,
concatenation, stack and select, zeros, and the tangent of a plain array (zeros)."""


def activation(name: str, alpha: float, beta: float) -> SimpleNamespace:
    """ONNX's activation ``name`` (lowercase) with its alpha and beta, on arrays and duals
    (``recurrence.gate_activation``)."""
    return gate_activation(name, alpha, beta, XP, DUAL)


# -- whole sequences ----------------------------------------------------------------------------------------------
def sequence_mask(lens: np.ndarray, steps: int, dtype) -> np.ndarray:
    """``[T, N, 1]``: 1.0 where step t is inside sequence n (t < lens[n])."""
    if lens.size and (lens.min() < 0 or lens.max() > steps):
        raise ValueError(f"sequence lengths must be in [0, {steps}] (the time axis), got {lens.tolist()}")
    return (np.arange(steps)[:, None] < lens[None, :]).astype(dtype)[:, :, None]


def reverse_index(lens: np.ndarray | None, steps: int, batch: int):
    """The index that reverses each sequence in place (its own first ``lens[n]`` steps); its own inverse."""
    t = np.arange(steps)[:, None]
    if lens is None:
        return (steps - 1 - t) * np.ones((1, batch), dtype=int), np.arange(batch)[None, :]
    return np.where(t < lens[None, :], lens[None, :] - 1 - t, t), np.arange(batch)[None, :]
