"""The cross-entropy of probabilities, its formula read from ``program/ops/nn.py`` (softmax, log_softmax and the
softmax cross-entropy state their math there as computes, and are derived).
"""
from __future__ import annotations

from gradgen.program.ops.nn import cross_entropy as formula

from ..xp import XP


def cross_entropy(op):
    """The op's formula (``program/ops/nn.cross_entropy``) over numpy. Not a ``compute`` of the op: the derived
    kernels of other engines cast a one-output op's inputs to its dtype, and a float16 holds an integer label
    exactly only up to 2048; here, and in the xla and torch engines' entries, Label goes in as it is."""
    attrs = {"soft_label": op.attr("soft_label"), "ignore_index": op.attr("ignore_index")}
    return lambda x, label: formula(XP, x, label, **attrs).astype(x.dtype, copy=False)


KERNELS = {"cross_entropy": cross_entropy}
