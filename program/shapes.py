"""Compile-time shape arithmetic, where -1 stands for a size known only at run time."""
from __future__ import annotations

from typing import Sequence

from .errors import ShapeInferenceError

Shape = tuple[int, ...]


def broadcast_shapes(*shapes: Sequence[int]) -> Shape:
    """numpy broadcasting over shapes that may hold -1 (unknown) dims.

    An unknown dim broadcast against 1 stays unknown; against a known size n > 1
    it must be n (or 1) at run time, and the result is n.
    """
    if len(shapes) == 2 and tuple(shapes[0]) == tuple(shapes[1]):
        return tuple(shapes[0])  # what the loop below gives for equal shapes; the common case, made cheap
    rank = max((len(s) for s in shapes), default=0)
    result = [1] * rank
    for shape in shapes:
        padded = (1,) * (rank - len(shape)) + tuple(shape)
        for i, d in enumerate(padded):
            r = result[i]
            if d == 1 or d == r:
                continue
            if r == 1:
                result[i] = d
            elif d == -1:
                continue  # r is known (> 1) or -1: keep r
            elif r == -1:
                result[i] = d
            else:
                raise ShapeInferenceError(
                    "shapes " + " and ".join(str(list(s)) for s in shapes)
                    + f" do not broadcast (dim {i - rank}: {r} vs {d})"
                )
    return tuple(result)


def normalize_axis(axis: int, rank: int) -> int:
    """Map a possibly negative axis into ``range(rank)``, or fail clearly."""
    if not -rank <= axis < max(rank, 1):
        raise ShapeInferenceError(f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def normalize_axes(axes: Sequence[int], rank: int) -> list[int]:
    """Normalize every axis and reject duplicates."""
    out = [normalize_axis(a, rank) for a in axes]
    if len(set(out)) != len(out):
        raise ShapeInferenceError(f"repeated axis in {list(axes)}")
    return out


def dims_agree(a: int, b: int) -> bool:
    """Two dims that could be equal at run time."""
    return a == b or a == -1 or b == -1


def shapes_agree(a: Sequence[int], b: Sequence[int]) -> bool:
    """Two shapes of equal rank whose dims could all be equal at run time."""
    return len(a) == len(b) and all(dims_agree(x, y) for x, y in zip(a, b))


def numel(shape: Sequence[int]) -> int:
    """Element count, or -1 if any dim is unknown."""
    n = 1
    for d in shape:
        if d < 0:
            return -1
        n *= d
    return n


def format_shape(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def unsqueezed(shape: Sequence[int], axes: Sequence[int]) -> tuple[int, ...]:
    """``shape`` with a 1 inserted at each of ``axes``, one after another, each normalized against the rank so
    far: what ``unsqueeze`` makes (its shape inference, and every backend's kernel on run-time shapes)."""
    out = list(shape)
    for a in axes:
        out.insert(normalize_axis(a, len(out) + 1), 1)
    return tuple(out)


__all__ = [
    "Shape", "broadcast_shapes", "normalize_axis", "normalize_axes", "dims_agree", "shapes_agree", "numel",
    "format_shape", "unsqueezed"
]
