"""Where a kernel's arrays come from: the plan's buffer for its result when it fits (``result_array``), and
scratch arrays reused between calls for what it computes on the way, instead of allocating (and
page-faulting) them every time.

``scratch(purpose, shape, dtype)`` hands out a view of one flat array per
(purpose, dtype) and thread, grown when a call needs more: the column
matrices of a convolution, a padded copy of its input. Callers keep them
bounded (conv kernels work on a few images at a time), so a thread holds a
few megabytes, not a batch's worth; an array above 64 MiB is never kept.

The values are garbage, and valid only until the calling thread asks for the
same purpose again: a kernel never returns a scratch view and never keeps one
across calls. Being per thread, two executors running in two threads never
share a scratch array; within a thread, kernels run one at a time.
"""
from __future__ import annotations

import threading
from typing import Sequence

import numpy as np

__all__ = ["scratch"]

_KEEP_BYTES = 64 << 20
"""Scratch arrays larger than this are allocated for the call and not kept: one huge image's columns should
not stay in a thread for good."""

_LOCAL = threading.local()
"""``arrays``: (purpose, dtype) -> this thread's flat array for it."""


def scratch(purpose: str, shape: Sequence[int], dtype) -> np.ndarray:
    """A C-contiguous array of ``shape`` and ``dtype`` with undefined values, this thread's for ``purpose``
    until its next call with the same purpose (and dtype)."""
    arrays = getattr(_LOCAL, "arrays", None)
    if arrays is None:
        arrays = _LOCAL.arrays = {}
    dtype = np.dtype(dtype)
    size = 1
    for d in shape:
        size *= d
    if size * dtype.itemsize > _KEEP_BYTES:
        return np.empty(shape, dtype)
    flat = arrays.get((purpose, dtype))
    if flat is None or flat.size < size:
        flat = arrays[(purpose, dtype)] = np.empty(size, dtype)
    return flat[:size].reshape(shape)
