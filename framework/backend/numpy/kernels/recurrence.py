"""The LSTM and GRU recurrences in numpy, forward and backward through time, for plain arrays and for dual
numbers: the cells' math and its loops are ``program/ops/recurrence.py``'s (written once for every engine), run
here with numpy's product, concatenation and select on arrays and duals (``DUAL``, ``program/ops/dual.py``).

One direction of one layer, time-major: X is ``[T, N, I]``, the state ``[N, H]`` (the gate layout:
``recurrence``). The gates' activations are data: ONNX's set, each written once over ``xp`` with its slope in
``ops.recurrent.ACTIVATIONS`` (``recurrence.gate_activation``).

``Dual`` (value, tangent) runs the same code forward-mode: the forward pass on duals gives the Jacobian of
the outputs applied to the inputs' tangents, and the backward pass on duals gives the tangent of the
gradients, i.e. the Hessian of ``<dOutputs, Outputs>`` applied to the tangents (plus the Jacobian's
transpose applied to the dOutputs' tangents). Those are the second-order gradients the ``*_jvp`` ops return.

The lengths, the reverse direction and the padding are ``program/ops/recurrence_kernels.py``'s.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from gradgen.program.ops.dual import dual_ops

__all__ = ["DUAL"]

DUAL = dual_ops(SimpleNamespace(zeros_like=np.zeros_like, zeros=lambda shape, like: np.zeros(shape, like.dtype),
                                concat=np.concatenate, stack=np.stack, where=np.where, matmul=np.matmul, exp=np.exp))
"""What the shared cell math (``program/ops/recurrence``) asks of the engine, on arrays and duals: numpy's product,
concatenation, stack and select, zeros, and the tangent of a plain array (zeros)."""
