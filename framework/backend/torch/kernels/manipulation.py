"""Hand-written torch kernels of the manipulation ops that do not state their math over ``xp``
(``numpy/kernels/manipulation.py``): slices (torch slicing takes no negative step) and gathers (negative and
out-of-range indexes checked as numpy's); out of place (a kernel never writes into an input: the scope's arrays
are shared with the run, not copied). The others are derived from their ``compute`` (``derived``)."""
from __future__ import annotations

import torch

from ...shared.attrs import op_axis, rank_of
from ...shared.manipulation import slice_index

__all__ = ["KERNELS", "checked_index", "positions"]


def positions(index: tuple, shape) -> list[tuple[int, torch.Tensor]]:
    """Per sliced axis, the positions a ``slice_index`` takes (torch slicing takes no negative step)."""
    return [(a, torch.arange(*s.indices(shape[a]))) for a, s in enumerate(index) if s != slice(None)]


def slice_(op):
    index = slice_index((0,) * rank_of(op), op.attr("axes"), op.attr("starts"), op.attr("ends"), op.attr("strides"))
    if all((s.step or 1) > 0 for s in index):
        return lambda x: x[index]  # Python slicing clamps out-of-range bounds, as numpy does

    def run(x):
        for a, at in positions(index, x.shape):
            x = torch.index_select(x, a, at)
        return x

    return run


def checked_index(index: torch.Tensor, size: int, axis: int) -> torch.Tensor:
    """``index`` with negative entries counted from the end; an IndexError for one outside [-size, size)."""
    bad = (index < -size) | (index >= size)
    if bool(bad.any()):
        first = int(index[bad].reshape(-1)[0])
        raise IndexError(f"index {first} is out of bounds for axis {axis} with size {size}")
    return torch.where(index < 0, index + size, index).to(torch.int64)


def gather(op):
    axis = op_axis(op)

    def run(x, index):
        flat = checked_index(index, x.shape[axis], axis).reshape(-1)
        picked = torch.index_select(x, axis, flat)
        return picked.reshape(tuple(x.shape[:axis]) + tuple(index.shape) + tuple(x.shape[axis + 1:]))

    return run


KERNELS = {"slice": slice_, "gather": gather}
