"""The softmax cross-entropy, the same for every engine, over an array module ``xp`` (numpy in the kernels,
``jax.numpy`` in the lowerings) on log_softmax's compute; each engine brings only its own reading of hard labels
(numpy raises on one out of range, xla states a run-time check). The label shape check is the ops' own
(``program/ops/nn.check_label_shape``)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from gradgen.program.ops.nn import check_label_shape, log_softmax

__all__ = ["softmax_cross_entropy"]


def softmax_cross_entropy(logits, label, axis: int, soft: bool, hard_labels: Callable, xp: Any = np) -> tuple:
    """(softmax, loss) of ``softmax_with_cross_entropy``: the loss from log-softmax, never from log(softmax), soft
    labels summed against it, hard ones picked, an ignored one giving 0. ``hard_labels(label, shape, axis) ->
    (index, kept)`` is the engine's reading of hard labels (indexes of x's rank, the mask of the kept ones)."""
    log_p = log_softmax(xp, logits, axis=axis)
    if soft:
        check_label_shape(label, logits.shape, None)
        loss = -xp.sum(label * log_p, axis=axis, keepdims=True)
    else:
        index, kept = hard_labels(label, logits.shape, axis)
        loss = xp.where(kept, -xp.take_along_axis(log_p, index, axis=axis), 0)
    return xp.exp(log_p), loss
