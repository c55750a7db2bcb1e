"""The loss ops' label checks and formulas, the same for every engine. Shapes are known when a numpy kernel runs
and when an xla lowering is traced, so both refuse a wrong label shape with one message; the formulas are written
once over an array module ``xp`` (numpy in the kernels, ``jax.numpy`` in the lowerings), and each engine brings
only its own reading of hard labels (numpy raises on one out of range, xla states a run-time check)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from gradgen.program.ops.nn import log_softmax

__all__ = ["check_label_shape", "log_softmax_along", "softmax_cross_entropy"]


def check_label_shape(label, x_shape, axis: int | None, what: str = "Logits") -> None:
    """Labels must have the run-time shape x's declared shape promised (-1 dims can differ at run time): x's own
    (``axis`` None: soft labels), or x's with size 1 on ``axis`` or without it (hard labels). numpy would
    broadcast a mismatch into a loss of another shape."""
    shape = np.shape(label)
    if axis is None:
        allowed = [tuple(x_shape)]
    else:
        allowed = [tuple(1 if i == axis else d for i, d in enumerate(x_shape)),
                   tuple(d for i, d in enumerate(x_shape) if i != axis)]
    if shape not in allowed:
        raise ValueError(f"Label has run-time shape {list(shape)}, but {what} {list(x_shape)} needs "
                         + " or ".join(str(list(a)) for a in allowed))


def log_softmax_along(x, axis: int, xp: Any = np):
    """log_softmax's compute (``program/ops/nn.py``) along ``axis``, over the array module ``xp``."""
    return log_softmax(xp, x, axis=axis)


def softmax_cross_entropy(logits, label, axis: int, soft: bool, hard_labels: Callable, xp: Any = np) -> tuple:
    """(softmax, loss) of ``softmax_with_cross_entropy``: the loss from log-softmax, never from log(softmax), soft
    labels summed against it, hard ones picked, an ignored one giving 0. ``hard_labels(label, shape, axis) ->
    (index, kept)`` is the engine's reading of hard labels (indexes of x's rank, the mask of the kept ones)."""
    log_p = log_softmax_along(logits, axis, xp)
    if soft:
        check_label_shape(label, logits.shape, None)
        loss = -xp.sum(label * log_p, axis=axis, keepdims=True)
    else:
        index, kept = hard_labels(label, logits.shape, axis)
        loss = xp.where(kept, -xp.take_along_axis(log_p, index, axis=axis), 0)
    return xp.exp(log_p), loss
