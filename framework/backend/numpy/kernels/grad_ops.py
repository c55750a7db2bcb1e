"""Kernels of the fused grad ops (see ``program/ops/grad_ops.py``) that do not state their math over ``xp``
(the others are derived: ``derived``)."""
from __future__ import annotations

import numpy as np

from .indexing import scatter_rows


def softmax_grad(op):
    rank = len(op.block.var(op.input("Out")[0]).shape)
    axis = op.attr("axis") % rank if rank else 0
    letters = "abcdefghijklmnopqrstuvwxyz"[:rank]
    dots = f"{letters},{letters}->{letters.replace(letters[axis], '')}"

    def run(y, dout):  # y * (dout - sum(dout * y, axis)): the sum reads both without a product
        if rank == 0:
            return np.zeros_like(dout)
        return (dout - np.expand_dims(np.einsum(dots, dout, y), axis)) * y

    return run


def slice_index(shape, axes, starts, ends, strides=()) -> tuple:
    """The numpy index that ``slice`` takes (python slicing clamps out-of-range bounds the same way)."""
    index = [slice(None)] * len(shape)
    for a, s, e, st in zip(axes, starts, ends, strides or [1] * len(axes)):
        index[a % len(shape)] = slice(s, e, st)
    return tuple(index)


def slice_grad(op):
    axes, starts, ends, strides = op.attr("axes"), op.attr("starts"), op.attr("ends"), op.attr("strides")

    def run(x, dout):
        dx = np.zeros(x.shape, dtype=dout.dtype)
        dx[slice_index(x.shape, axes, starts, ends, strides)] = dout
        return dx

    return run


def gather_grad(op):
    axis = op.attr("axis")
    return lambda x, index, dout: scatter_rows(np.zeros(x.shape, dtype=dout.dtype), index, dout, axis, add=True)


def reshape_as(op):
    return lambda x, target: np.reshape(x, np.shape(target))


def split_like(op):
    axis = op.attr("axis")

    def run(x, *likes):
        bounds = np.cumsum([np.shape(t)[axis] for t in likes])[:-1]
        pieces = np.split(x, bounds, axis=axis)
        return pieces[0] if len(pieces) == 1 else tuple(pieces)

    return run


KERNELS = {
    "softmax_grad": softmax_grad, "slice_grad": slice_grad, "gather_grad": gather_grad,
    "reshape_as": reshape_as, "split_like": split_like,
}
