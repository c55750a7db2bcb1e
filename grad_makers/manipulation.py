"""Gradients of ops that move elements: mostly the inverse movement, often the very same op type.

Every one is linear, so its tangent moves the input's tangent the same way: the
op itself on it (``linear_in``), the other inputs (shapes, indices) as they are.
"""
from __future__ import annotations

import numpy as np

from gradgen.program.shapes import normalize_axis

from .base import grad_maker
from .families import linear, summed_back
from .scan import BIG
from .tangent_rules import linear_in, tangent_rule, zeros_for_missing


assign_grad = linear("assign", emits=("assign",), transpose=lambda g, dout: dout)
assign_tangent = linear_in("assign")
cast_grad = linear("cast", emits=("cast",), transpose=lambda g, dout, op: g.cast(dout, op.dtype(op.input("X"))))
cast_tangent = linear_in("cast")
broadcast_to_grad = linear("broadcast_to", emits=("reduce_as",),
                           transpose=lambda g, dout, op: g.reduce_as(dout, op.input("X")))
broadcast_to_tangent = linear_in("broadcast_to")
reduce_as_grad = linear("reduce_as", emits=("broadcast_to",),
                        transpose=lambda g, dout, op: g.broadcast_to(dout, op.input("X")))
reduce_as_tangent = linear_in("reduce_as")
reshape_grad = linear("reshape", "squeeze", "unsqueeze", "reshape_as", "flatten", emits=("reshape_as",),
                      transpose=lambda g, dout, op: g.reshape_as(dout, op.input("X")))
reshape_tangent = linear_in("reshape", "squeeze", "unsqueeze", "reshape_as", "flatten")
transpose_grad = linear("transpose", emits=("transpose",),
                        transpose=lambda g, dout, perm: g.transpose(dout, [int(i) for i in np.argsort(perm)]))
transpose_tangent = linear_in("transpose")
triangle_grad = linear("tril", "triu", emits=("tril", "triu"),
                       transpose=lambda g, dout, op: g.op(op.type, {"X": dout}, op.attrs))
"""A mask is its own adjoint: the kept triangle of dout."""
triangle_tangent = linear_in("tril", "triu")
slice_grad = linear("slice", emits=("slice_grad",), transpose=lambda g, dout, op: g.op(
    "slice_grad", {"X": op.input("X"), "Out@GRAD": dout}, op.attrs, outputs="X@GRAD"))
slice_tangent = linear_in("slice")
gather_grad = linear("gather", emits=("gather_grad",), transpose=lambda g, dout, op: g.op(
    "gather_grad", {"X": op.input("X"), "Index": op.input("Index"), "Out@GRAD": dout}, op.attrs, outputs="X@GRAD"))
gather_tangent = linear_in("gather")


def _unpad(g, dout, paddings):
    """The slice of ``dout`` that pad's input became: from ``before`` to ``after`` from the end of each dim."""
    before, after = paddings[0::2], paddings[1::2]
    return g.op("slice", {"X": dout}, {"axes": list(range(len(before))), "starts": list(before),
                                      "ends": [-a if a else BIG for a in after]})


pad_grad = linear("pad", emits=("slice",), transpose=lambda g, dout, paddings: _unpad(g, dout, paddings))


@tangent_rule("pad", emits=("pad",))
def pad_tangent(g, op):
    """The padding is a constant: the tangent is padded with zeros whatever ``pad_value`` is."""
    t = op.tangent("X")
    return {"Out": g.op("pad", {"X": t}, {**op.attrs, "pad_value": 0.0})} if t is not None else {}


@grad_maker("sum", emits=("assign",))
def sum_grad(g, op):
    """Each addend's gradient is the output's (an assign shares the array)."""
    return {"X": [op.grad("Out")] * len(op.inputs("X"))}


@tangent_rule("sum", emits=("sum",))
def sum_tangent(g, op):
    present = [t for t in op.tangents("X") if t is not None]
    if len(present) < 2:
        return {"Out": present[0] if present else None}
    return {"Out": g.op("sum", {"X": present})}


@grad_maker("split", emits=("concat",))
def split_grad(g, op):
    """split -> concat of the pieces' gradients (the pass zero-fills pieces nothing used)."""
    return {"X": g.concat(op.grads("Out"), op.attr("axis"))}


split_tangent = linear_in("split")


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


@tangent_rule("concat", "stack", emits=("concat", "stack", "fill_zeros_like"))
def joined_tangent(g, op):
    """The pieces' tangents joined the same way, with zeros for pieces that have none."""
    xs, ts = op.inputs("X"), op.tangents("X")
    if all(t is None for t in ts):
        return {}
    return {"Out": g.op(op.type, {"X": zeros_for_missing(g, xs, ts)}, op.attrs)}


@grad_maker("where", emits=("fill_zeros_like", "where", "reduce_as"))
def where_grad(g, op):
    """Each branch gets the output gradient where it was chosen and zero elsewhere, summed back to its shape."""
    cond, dout, full = op.input("Condition"), op.grad("Out"), op.shape(op.output("Out"))
    zeros = g.fill_zeros_like(dout)
    x, y = op.input("X"), op.input("Y")

    def back(grad, like: str, other: str):
        return summed_back(g, op, grad, like, full, [op.shape(n) for n in (cond, other) if n != like])

    return {"X": back(g.where(cond, dout, zeros), x, y), "Y": back(g.where(cond, zeros, dout), y, x)}


@tangent_rule("where", emits=("where", "fill_zeros_like"))
def where_tangent(g, op):
    tx, ty, out = op.tangent("X"), op.tangent("Y"), op.output("Out")
    if tx is None and ty is None:
        return {}
    tx, ty = zeros_for_missing(g, [out, out], [tx, ty])
    return {"Out": g.where(op.input("Condition"), tx, ty)}


__all__ = ["assign_grad", "assign_tangent", "cast_grad", "cast_tangent", "broadcast_to_grad", "broadcast_to_tangent",
           "reduce_as_grad", "reduce_as_tangent", "reshape_grad", "reshape_tangent", "transpose_grad",
           "transpose_tangent", "triangle_grad", "triangle_tangent", "slice_grad", "slice_tangent", "gather_grad",
           "gather_tangent", "pad_grad", "pad_tangent", "sum_grad", "sum_tangent", "split_grad", "split_tangent",
           "concat_grad", "stack_grad", "joined_tangent", "where_grad", "where_tangent"]
