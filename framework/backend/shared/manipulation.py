"""Helpers of the manipulation ops that do not state their math over ``xp``, written once for every engine: they
take only shapes and attrs (the others' helpers sit beside their ``compute``, in ``program/ops/manipulation.py``)."""
from __future__ import annotations

__all__ = ["slice_index"]


def slice_index(shape, axes, starts, ends, strides=()) -> tuple:
    """The index that ``slice`` takes (python slicing clamps out-of-range bounds the same way), for an array of
    ``shape``'s rank; ``slice_grad`` writes its gradient at the same index."""
    index = [slice(None)] * len(shape)
    for a, s, e, st in zip(axes, starts, ends, strides or [1] * len(axes)):
        index[a % len(shape)] = slice(s, e, st)
    return tuple(index)
