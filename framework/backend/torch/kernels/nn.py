"""The cross-entropy of probabilities, its formula read from ``program/ops/nn.py`` over torch (softmax,
log_softmax and the softmax cross-entropy state their math there as computes, and are derived). Not derived
itself: the derived kernels cast a one-output op's inputs to its dtype, and a float16 holds an integer label
exactly only up to 2048; Label goes in as it is."""
from __future__ import annotations

from gradgen.program.ops.nn import cross_entropy as formula

from ..xp import XP, torch_dtype

__all__ = ["KERNELS"]


def cross_entropy(op):
    dtype = torch_dtype(op.block.var(op.output("Out")[0]).dtype)
    attrs = {"soft_label": op.attr("soft_label"), "ignore_index": op.attr("ignore_index")}
    return lambda x, label: formula(XP, x, label, **attrs).to(dtype)


KERNELS = {"cross_entropy": cross_entropy}
