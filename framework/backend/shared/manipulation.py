"""Helpers of the ops that move and regroup elements, written once for every engine: they take any array with
numpy's methods (a numpy array, a traced jax array), or only shapes and attrs."""
from __future__ import annotations

__all__ = ["section_sizes", "slice_index", "summed_to_shape"]


def slice_index(shape, axes, starts, ends, strides=()) -> tuple:
    """The index that ``slice`` takes (python slicing clamps out-of-range bounds the same way), for an array of
    ``shape``'s rank; ``slice_grad`` writes its gradient at the same index."""
    index = [slice(None)] * len(shape)
    for a, s, e, st in zip(axes, starts, ends, strides or [1] * len(axes)):
        index[a % len(shape)] = slice(s, e, st)
    return tuple(index)


def section_sizes(sections, size: int, axis: int) -> list[int]:
    """``split``'s piece sizes along an axis of ``size``: ``sections`` with its one -1 (if any) given the rest; a
    ValueError when they do not add up (a rest of -2 would "add up" and cut a piece short)."""
    sizes = list(sections)
    if -1 in sizes:
        sizes[sizes.index(-1)] = size - (sum(sizes) + 1)
    if sum(sizes) != size or min(sizes) < 0:
        raise ValueError(f"sections {list(sections)} do not add up to size {size} of axis {axis}")
    return sizes


def summed_to_shape(x, shape):
    """``x`` summed over the dims broadcasting added to reach ``shape`` (the adjoint of broadcasting), in x's
    dtype (numpy would sum int32 to int64): ``reduce_as`` on both engines."""
    if x.shape == tuple(shape):
        return x
    lead = x.ndim - len(shape)
    if lead:
        x = x.sum(axis=tuple(range(lead)), dtype=x.dtype)
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and x.shape[i] != 1)
    if axes:
        x = x.sum(axis=axes, keepdims=True, dtype=x.dtype)
    return x
