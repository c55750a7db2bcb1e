"""The cheap tests the fast ATen paths share: are all these tensors finite, and does ATen's fused kernel take this
dtype? (ATen's fused kernels and oneDNN treat
NaN and infinities otherwise than the numpy reference in a few places; those kernels check first and take the
reference's formulas when a value is not finite.)"""
from __future__ import annotations

import math
import threading
import weakref
from contextlib import contextmanager
from typing import Iterator

import torch

__all__ = ["FUSED", "all_finite", "fused", "remembered_finite"]

_run = threading.local()
"""``_run.finite``: inside ``remembered_finite`` on this thread, id -> weak reference of each tensor found finite."""


@contextmanager
def remembered_finite() -> Iterator[None]:
    """Inside the ``with`` (one run, on this thread), a tensor ``all_finite`` found finite is not summed again: the
    engine's tensors never change once made (no kernel writes in place) and a run's tensors are its own (made from
    the scope's arrays at each run's start). Each is known by its ``id`` and a weak reference, so a tensor freed and
    another made at its address is not taken for it. Measured on the anchors' transformer block (the products'
    operands, most read by two or three products a step): the sums took 3.1 ms of a 90.7 ms step before."""
    before = getattr(_run, "finite", None)
    _run.finite = {}
    try:
        yield
    finally:
        _run.finite = before


def all_finite(*xs: torch.Tensor) -> bool:
    """True only if every element of ``xs`` is finite, read from each tensor's sum: a NaN or an infinity makes the
    sum NaN or infinite (IEEE), so a finite sum proves them all finite; a finite tensor whose sum overflows takes
    the careful path, which is right too. On ResNet's [32, 64, 32, 32] float32, two threads, the sum took 0.11 ms
    and ``isfinite(x).all()`` 1.7 ms (five such checks per convolution and its gradients had cost 30 ms a step).
    Each sum is tested as a Python float (a tensor ``isfinite`` on each cost more ATen calls: LeNet's two tensors,
    19.4 against 12.0 us); inside ``remembered_finite`` a tensor found finite before is not summed again."""
    known = getattr(_run, "finite", None)
    for x in xs:
        if not x.dtype.is_floating_point:
            continue
        seen = known.get(id(x)) if known is not None else None
        if seen is not None and seen() is x:
            continue
        if not math.isfinite(float(torch.sum(x))):
            return False
        if known is not None:
            known[id(x)] = weakref.ref(x)
    return True


FUSED = (torch.float32, torch.float64)
"""The dtypes ATen's fused kernels run here: float16 takes the op's compute (in float32 for the norms, in float16
for softmax and the ops of one ATen call, as the reference rounds; ATen's half kernels round otherwise)."""


def fused(x: torch.Tensor) -> bool:
    """Whether an ATen fast path may take ``x``: float32 or float64, and not empty."""
    return x.dtype in FUSED and x.numel() > 0
