"""The cross-entropy of probabilities, its formula read from ``program/ops/nn.py`` and traced over ``jax.numpy``
(softmax, log_softmax and the softmax cross-entropy state their math there as computes, and are derived).

Not derived itself: the derived lowerings cast a one-output op's inputs to its dtype, and a float16 holds an
integer label exactly only up to 2048; Label goes in as it is. A hard label outside [0, classes) that is not
``ignore_index`` is a run-time check (the formula's ``xp.check``): XLA would clamp it to a class silently.
"""
from __future__ import annotations

from gradgen.program.ops.nn import cross_entropy as formula

from ...shared.attrs import out_dtype
from ..xp import XP
from .derived import Traced

__all__ = ["LOWERINGS"]


def _cross_entropy(op, ctx):
    dtype, xp = out_dtype(op), Traced(XP, ctx)
    attrs = {"soft_label": op.attr("soft_label"), "ignore_index": op.attr("ignore_index")}
    return lambda x, label: formula(xp, x, label, **attrs).astype(dtype)


LOWERINGS = {"cross_entropy": _cross_entropy}
