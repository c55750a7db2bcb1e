"""Hand-written torch kernels of the manipulation family (``numpy/kernels/manipulation.py``): sums of addends,
broadcasts and their reductions, splits, slices, reshapes, stacks, gathers and pads; out of place (a kernel never
writes into an input: the scope's arrays are shared with the run, not copied)."""
from __future__ import annotations

import math

import torch

from gradgen.program.shapes import unsqueezed

from ...shared.attrs import op_axis, rank_of
from ...shared.manipulation import section_sizes, slice_index

__all__ = ["KERNELS", "checked_index", "positions", "summed_to"]


def sum_(op):
    if len(op.input("X")) == 1:
        return lambda x: x

    def run(*xs):
        if any(x.shape != xs[0].shape for x in xs[1:]):
            raise ValueError(f"the addends have run-time shapes {[list(x.shape) for x in xs]}, not one shape")
        total = xs[0] + xs[1]
        for x in xs[2:]:
            total = total + x
        return total

    return run


def summed_to(x: torch.Tensor, shape) -> torch.Tensor:
    """``x`` summed over the dims broadcasting added to reach ``shape``, in x's dtype (``reduce_as``)."""
    shape = tuple(shape)
    if tuple(x.shape) == shape:
        return x
    lead = x.ndim - len(shape)
    if lead:
        x = torch.sum(x, dim=tuple(range(lead)), dtype=x.dtype)
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and x.shape[i] != 1)
    if axes:
        x = torch.sum(x, dim=axes, keepdim=True, dtype=x.dtype)
    return x


def reduce_as(op):
    return lambda x, target: summed_to(x, target.shape)


def broadcast_to(op):
    if op.input("ShapeLike"):
        return lambda x, like: torch.broadcast_to(x, tuple(like.shape))
    shape = tuple(op.attr("shape"))
    return lambda x: torch.broadcast_to(x, shape)


def split(op):
    axis, sections = op_axis(op), list(op.attr("sections"))

    def run(x):
        sizes = section_sizes(sections, x.shape[axis], axis)
        pieces = torch.split(x, sizes, dim=axis)
        return pieces[0] if len(pieces) == 1 else tuple(pieces)

    return run


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


def squeeze(op):
    axes = tuple(op.attr("axes"))
    if not axes:
        return lambda x: torch.reshape(x, tuple(d for d in x.shape if d != 1))
    rank = len(op.block.var(op.input("X")[0]).shape)
    drop = tuple(sorted({a % rank for a in axes}))

    def run(x):
        if any(x.shape[a] != 1 for a in drop):
            raise ValueError(f"cannot squeeze axes {list(drop)} of shape {list(x.shape)}: not of size 1")
        return torch.reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in drop))

    return run


def unsqueeze(op):
    axes = op.attr("axes")
    return lambda x: torch.reshape(x, unsqueezed(tuple(x.shape), axes))


def stack(op):
    axis = op.attr("axis")
    return lambda *xs: torch.stack(xs, dim=axis)


def flatten(op):
    rank = len(op.block.var(op.input("X")[0]).shape)
    axis = op.attr("axis") + rank if op.attr("axis") < 0 else op.attr("axis")
    return lambda x: torch.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))


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


def pad(op):
    pads, value = op.attr("paddings"), op.attr("pad_value")
    widths = [pads[2 * i + j] for i in reversed(range(len(pads) // 2)) for j in (0, 1)]
    if not widths:
        return lambda x: x
    return lambda x: torch.nn.functional.pad(x, widths, value=value)


KERNELS = {
    "sum": sum_, "reduce_as": reduce_as, "broadcast_to": broadcast_to, "split": split, "slice": slice_,
    "squeeze": squeeze, "unsqueeze": unsqueeze, "stack": stack, "flatten": flatten, "gather": gather, "pad": pad,
}
