"""Gradients of ops that move elements: mostly the inverse movement, often the very same op type."""
from __future__ import annotations

import numpy as np

from gradgen.program.shapes import normalize_axis

from .base import grad_maker
from .families import linear, summed_back
from .scan import BIG


assign_grad = linear("assign", emits=("assign",), transpose=lambda g, dout: dout)
cast_grad = linear("cast", emits=("cast",), transpose=lambda g, dout, op: g.cast(dout, op.dtype(op.input("X"))))
broadcast_to_grad = linear("broadcast_to", emits=("reduce_as",),
                           transpose=lambda g, dout, op: g.reduce_as(dout, op.input("X")))
reduce_as_grad = linear("reduce_as", emits=("broadcast_to",),
                        transpose=lambda g, dout, op: g.broadcast_to(dout, op.input("X")))
reshape_grad = linear("reshape", "squeeze", "unsqueeze", "reshape_as", "flatten", emits=("reshape_as",),
                      transpose=lambda g, dout, op: g.reshape_as(dout, op.input("X")))
transpose_grad = linear("transpose", emits=("transpose",),
                        transpose=lambda g, dout, perm: g.transpose(dout, [int(i) for i in np.argsort(perm)]))
triangle_grad = linear("tril", "triu", emits=("tril", "triu"),
                       transpose=lambda g, dout, op: g.op(op.type, {"X": dout}, op.attrs))
"""A mask is its own adjoint: the kept triangle of dout."""
slice_grad = linear("slice", emits=("slice_grad",), transpose=lambda g, dout, op: g.op(
    "slice_grad", {"X": op.input("X"), "Out@GRAD": dout}, op.attrs, outputs="X@GRAD"))
gather_grad = linear("gather", emits=("gather_grad",), transpose=lambda g, dout, op: g.op(
    "gather_grad", {"X": op.input("X"), "Index": op.input("Index"), "Out@GRAD": dout}, op.attrs, outputs="X@GRAD"))



def _unpad(g, dout, paddings):
    """The slice of ``dout`` that pad's input became: from ``before`` to ``after`` from the end of each dim."""
    before, after = paddings[0::2], paddings[1::2]
    return g.op("slice", {"X": dout}, {"axes": list(range(len(before))), "starts": list(before),
                                      "ends": [-a if a else BIG for a in after]})


pad_grad = linear("pad", emits=("slice",), transpose=lambda g, dout, paddings: _unpad(g, dout, paddings))


@grad_maker("sum", emits=("assign",))
def sum_grad(g, op):
    """Each addend's gradient is the output's (an assign shares the array)."""
    return {"X": [op.grad("Out")] * len(op.inputs("X"))}


@grad_maker("split", emits=("concat",))
def split_grad(g, op):
    """split -> concat of the pieces' gradients (the pass zero-fills pieces nothing used)."""
    return {"X": g.concat(op.grads("Out"), op.attr("axis"))}


@grad_maker("concat", emits=("split", "split_like"))
def concat_grad(g, op):
    """concat -> split at the inputs' sizes along the axis, or split_like when they are known only at run time."""
    xs, dout = op.inputs("X"), op.grad("Out")
    axis = normalize_axis(op.attr("axis"), len(op.shape(xs[0])))
    sizes = [op.shape(x)[axis] for x in xs]
    if min(sizes) < 0:
        return {"X": g.op("split_like", {"X": dout, "Like": xs}, {"axis": axis}, outputs={"Out": len(xs)})["Out"]}
    return {"X": g.split(dout, axis, sizes)}


@grad_maker("stack", emits=("split", "squeeze"))
def stack_grad(g, op):
    """stack -> split into size-1 pieces along the axis, each squeezed."""
    axis = normalize_axis(op.attr("axis"), len(op.shape(op.output("Out"))))
    pieces = g.split(op.grad("Out"), axis, [1] * len(op.inputs("X")))
    return {"X": [g.squeeze(p, [axis]) for p in pieces]}


@grad_maker("where", emits=("fill_zeros_like", "where", "reduce_as"))
def where_grad(g, op):
    """Each branch gets the output gradient where it was chosen and zero elsewhere, summed back to its shape."""
    cond, dout, full = op.input("Condition"), op.grad("Out"), op.shape(op.output("Out"))
    zeros = g.fill_zeros_like(dout)
    x, y = op.input("X"), op.input("Y")

    def back(grad, like: str, other: str):
        return summed_back(g, op, grad, like, full, [op.shape(n) for n in (cond, other) if n != like])

    return {"X": back(g.where(cond, dout, zeros), x, y), "Y": back(g.where(cond, zeros, dout), y, x)}


__all__ = ["assign_grad", "cast_grad", "broadcast_to_grad", "reduce_as_grad", "reshape_grad", "transpose_grad",
           "triangle_grad", "slice_grad", "gather_grad", "pad_grad", "sum_grad", "split_grad", "concat_grad", "stack_grad", "where_grad"]
