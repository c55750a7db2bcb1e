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

__all__ = ["FUSED", "all_finite", "broadcast_dims", "fused", "known_finite", "remembered", "remembered_finite"]

_run = threading.local()
"""Inside ``remembered_finite`` on this thread: ``_run.finite``, id -> weak reference of each tensor known finite;
``_run.spans``, (first byte, elements, dtype) -> weak reference of the storage of each dense one (``_span``)."""


@contextmanager
def remembered_finite() -> Iterator[None]:
    """Inside the ``with`` (one run, on this thread), a tensor ``all_finite`` found finite is not summed again: the
    engine's tensors never change once made (no kernel writes in place) and a run's tensors are its own (made from
    the scope's arrays at each run's start). Each is known by its ``id`` and a weak reference, so a tensor freed and
    another made at its address is not taken for it. Measured on the anchors' transformer block (the products'
    operands, most read by two or three products a step): the sums took 3.1 ms of a 90.7 ms step before."""
    before = getattr(_run, "finite", None), getattr(_run, "spans", None)
    _run.finite, _run.spans = {}, {}
    try:
        yield
    finally:
        _run.finite, _run.spans = before


def _span(x: torch.Tensor) -> tuple | None:
    """The bytes ``x`` reads, as (first byte, elements, dtype), where its elements fill them each once (contiguous,
    or a permutation of the dims of a contiguous tensor: a transposed view); None for other views (a slice, an
    expanded dim). Two tensors of one span read the same values: a reshape's view, or the op's input passed on as
    its output, of one found finite is finite, not summed again. Measured on the anchors' transformer block: 12
    of its step's 37 sums were of such views (each product's operands reshaped to rows for the weight's
    gradient)."""
    if not x.is_contiguous():
        expected = 1
        for stride, size in sorted(zip(x.stride(), x.shape)):
            if size != 1:
                if stride != expected:
                    return None
                expected *= size
    return x.data_ptr(), x.numel(), x.dtype


def known_finite(x: torch.Tensor) -> None:
    """Remember, for the rest of this run, that ``x`` is finite: a kernel whose output is finite whenever its
    inputs are (softmax's, of inputs it found finite) says so, and the next kernel reading it sums nothing."""
    known = getattr(_run, "finite", None)
    if known is not None:
        _remember(x, known, _span(x))


def _remember(x: torch.Tensor, known: dict, span: tuple | None) -> None:
    known[id(x)] = weakref.ref(x)
    if span is not None:
        _run.spans[span] = weakref.ref(x.untyped_storage())


def _remembered(x: torch.Tensor, known: dict, span: tuple | None) -> bool:
    """Whether this run knows ``x`` finite, or a tensor of ``x``'s span (``span``) whose storage is ``x``'s (alive,
    so the bytes are still the ones found finite: no kernel writes in place). The storage, not the tensor, is what
    must be alive: a reshape's view outlives the tensor it views where that dies at the reshape (torch keeps a
    storage's Python object while any tensor uses it, so a weak reference to it dies with the storage). A view so
    found is remembered by id too."""
    seen = known.get(id(x))
    if seen is not None and seen() is x:
        return True
    storage = _run.spans.get(span) if span is not None else None
    if storage is None or storage() is not x.untyped_storage():
        return False
    known[id(x)] = weakref.ref(x)
    return True


def remembered(x: torch.Tensor) -> bool:
    """Whether this run knows ``x`` finite already (no sum taken): an integer tensor, one found finite, or a view of
    one's bytes."""
    if not x.dtype.is_floating_point:
        return True
    known = getattr(_run, "finite", None)
    return known is not None and _remembered(x, known, _span(x))


def broadcast_dims(x: torch.Tensor) -> list[int]:
    """The dims along which ``x`` repeats one element (stride 0, more than one element): a broadcast view's."""
    return [dim for dim, (stride, size) in enumerate(zip(x.stride(), x.shape)) if stride == 0 and size > 1]


def _distinct(x: torch.Tensor) -> torch.Tensor:
    """``x`` without its broadcast dims: the same values, each once (reduce_mean's gradient, one number a sample
    broadcast over ResNet's [32, 64, 32, 32], is summed over 32 numbers, not 2 million)."""
    for dim in broadcast_dims(x):
        x = x.narrow(dim, 0, 1)
    return x


def all_finite(*xs: torch.Tensor) -> bool:
    """True only if every element of ``xs`` is finite, read from each tensor's sum: a NaN or an infinity makes the
    sum NaN or infinite (IEEE), so a finite sum proves them all finite; a finite tensor whose sum overflows takes
    the careful path, which is right too. On ResNet's [32, 64, 32, 32] float32, two threads, the sum took 0.11 ms
    and ``isfinite(x).all()`` 1.7 ms (five such checks per convolution and its gradients had cost 30 ms a step).
    Each sum is tested as a Python float (a tensor ``isfinite`` on each cost more ATen calls: LeNet's two tensors,
    19.4 against 12.0 us); inside ``remembered_finite`` a tensor known finite, or a view of one's bytes, is not
    summed again."""
    known = getattr(_run, "finite", None)
    for x in xs:
        if not x.dtype.is_floating_point:
            continue
        span = _span(x) if known is not None else None
        if known is not None and _remembered(x, known, span):
            continue
        if not math.isfinite(float(torch.sum(_distinct(x)))):
            return False
        if known is not None:
            _remember(x, known, span)
    return True


FUSED = (torch.float32, torch.float64)
"""The dtypes ATen's fused kernels run here: float16 takes the op's compute (in float32 for the norms, in float16
for softmax and the ops of one ATen call, as the reference rounds; ATen's half kernels round otherwise)."""


def fused(x: torch.Tensor) -> bool:
    """Whether an ATen fast path may take ``x``: float32 or float64, and not empty."""
    return x.dtype in FUSED and x.numel() > 0
