"""``x[key]`` on a Variable: numpy's basic indexing and one integer Variable index, built from ordinary ops.

    x[:, 0:2]      slice(axes=[1], starts=[0], ends=[2])
    x[::-1]        slice(axes=[0], starts=[MAX], ends=[MIN], strides=[-1])
    x[1]           slice(axes=[0], starts=[1], ends=[2]), then squeeze(axes=[0])
    x[i]           gather(x, i, axis=0), i an int Variable: its dims take axis 0's place
    x[..., None]   unsqueeze(axes=[rank])

Every result is a new var made by ops that have gradients (slice, gather,
squeeze, unsqueeze), so indexing is differentiable like any layer. An int
index must be in range when the dim is known; a Variable index is checked at
run time (by gather). A Variable index may be combined with slices and None
but not with int indexes (numpy would move the dims: write it as two steps).
"""
from __future__ import annotations

import operator
import sys

from ..dtypes import INT_DTYPES
from ..errors import ProgramError
from ..variable import Variable
from . import manipulation

MAX, MIN = sys.maxsize, -sys.maxsize - 1
"""Slice bounds past either end of any dim (slicing clamps them): what an omitted bound means."""


def _expanded(x: Variable, key) -> list:
    """``key`` as a list with one item per dim of x (plus the Nones): the Ellipsis or the missing tail become ``:``."""
    items = list(key) if isinstance(key, tuple) else [key]
    ellipses = [k for k, item in enumerate(items) if item is Ellipsis]
    if len(ellipses) > 1:
        raise ProgramError(f"index of '{x.name}': an index can only have a single ellipsis (...)")
    used = sum(item is not None and item is not Ellipsis for item in items)
    if used > x.ndim:
        raise ProgramError(f"index of '{x.name}' {x.type_str()}: {used} indexes for {x.ndim} dims")
    fill = [slice(None)] * (x.ndim - used)
    if ellipses:
        return items[:ellipses[0]] + fill + items[ellipses[0] + 1:]
    return items + fill


def _bounds(x: Variable, axis: int, item: slice) -> tuple[int, int, int] | None:
    """(start, end, stride) of a slice item, or None for ``:`` (nothing to do)."""
    step = 1 if item.step is None else operator.index(item.step)
    if step == 0:
        raise ProgramError(f"index of '{x.name}': slice step cannot be zero (axis {axis})")
    start = (0 if step > 0 else MAX) if item.start is None else operator.index(item.start)
    end = (MAX if step > 0 else MIN) if item.stop is None else operator.index(item.stop)
    return None if (start, end, step) == (0, MAX, 1) else (start, end, step)


def _int_bounds(x: Variable, axis: int, i: int) -> tuple[int, int, int]:
    size = x.shape[axis]
    if size >= 0 and not -size <= i < size:
        raise ProgramError(f"index {i} is out of range for axis {axis} of '{x.name}' {x.type_str()}")
    return i, (i + 1 if i != -1 else MAX), 1


def subscript(x: Variable, key) -> Variable:
    """``x[key]`` for ints, slices (any step), ``...``, ``None`` and one int Variable index."""
    sliced: dict[int, tuple[int, int, int]] = {}
    dropped, new_dims, taken = [], [], None
    axis = out_dim = 0
    for item in _expanded(x, key):
        if item is None:
            new_dims.append(out_dim)
            out_dim += 1
            continue
        if isinstance(item, Variable):
            if item.dtype not in INT_DTYPES or taken is not None:
                raise ProgramError(f"index of '{x.name}': a Variable index must be int32 or int64 and there can be "
                                   f"only one; got '{item.name}' {item.type_str()}")
            taken, out_dim = (axis, item), out_dim + item.ndim
        elif isinstance(item, slice):
            bounds = _bounds(x, axis, item)
            if bounds is not None:
                sliced[axis] = bounds
            out_dim += 1
        else:
            try:
                if type(item).__name__ in ("bool", "bool_"):  # numpy reads a bool as a mask, not as 0 or 1
                    raise TypeError
                i = operator.index(item)
            except TypeError:
                raise ProgramError(f"index of '{x.name}': cannot index with {type(item).__name__} {item!r} (ints, "
                                   "slices, ..., None and one int Variable are supported)") from None
            sliced[axis] = _int_bounds(x, axis, i)
            dropped.append(axis)
        axis += 1
    if taken is not None and dropped:
        raise ProgramError(f"index of '{x.name}': an int Variable index cannot be combined with int indexes; "
                           "index in two steps")
    out = x
    if sliced:
        axes = sorted(sliced)
        out = manipulation.slice(out, axes, [sliced[a][0] for a in axes], [sliced[a][1] for a in axes],
                                 [sliced[a][2] for a in axes] if any(sliced[a][2] != 1 for a in axes) else None)
    if taken is not None:
        out = manipulation.gather(out, taken[1], axis=taken[0])
    if dropped:
        out = manipulation.squeeze(out, dropped)
    if new_dims:
        out = manipulation.unsqueeze(out, new_dims)
    return out


__all__ = ["subscript", "MAX", "MIN"]
