"""Gradients of the integer-position ops: each is a gather, a scatter or a take along an axis, and so is its adjoint.

    gather            <-> scatter_add (gather_grad: scatter_add onto zeros)
    take_along_axis   <-> take_along_axis_grad
    top_k, sort       -> take_along_axis_grad at the chosen indices (ties: the lower index, as the kernel chose)

Each is linear in its float inputs, so the tangent is the same movement of the
tangents (zeros standing in for an input without one); top_k's and sort's
values move with the elements they chose.
"""
from __future__ import annotations

from .base import grad_maker
from .families import linear
from .tangent_rules import linear_in, tangent_rule, zeros_for_missing


def _take_grad(g, x, index, dout, axis: int):
    return g.op("take_along_axis_grad", {"X": x, "Index": index, "Out@GRAD": dout}, {"axis": axis}, outputs="X@GRAD")


@grad_maker("scatter", emits=("fill_zeros_like", "scatter", "gather"))
def scatter_grad(g, op):
    """Out = X with the indexed slices replaced: X's gradient is dout with them zeroed, Updates' is dout there."""
    index, dout, axis = op.input("Index"), op.grad("Out"), op.attr("axis")
    cleared = g.op("scatter", {"X": dout, "Index": index, "Updates": g.fill_zeros_like(op.input("Updates"))},
                   {"axis": axis})
    return {"X": cleared, "Updates": g.gather(dout, index, axis)}


@grad_maker("scatter_add", emits=("assign", "gather"))
def scatter_add_grad(g, op):
    """Out = X + updates added at Index: X's gradient is dout, Updates' is dout gathered at Index."""
    dout = op.grad("Out")
    return {"X": dout, "Updates": g.gather(dout, op.input("Index"), op.attr("axis"))}


@tangent_rule("scatter", "scatter_add", emits=("scatter", "scatter_add", "fill_zeros_like"))
def scatter_tangent(g, op):
    """The same scatter of the updates' tangent into X's tangent; scatter_add with only X moving is X's."""
    x, updates = op.input("X"), op.input("Updates")
    tx, tu = op.tangent("X"), op.tangent("Updates")
    if tu is None and (tx is None or op.type == "scatter_add"):
        return {"Out": tx}
    tx, tu = zeros_for_missing(g, [x, updates], [tx, tu])
    return {"Out": g.op(op.type, {"X": tx, "Index": op.input("Index"), "Updates": tu}, op.attrs)}


take_along_axis_grad = linear(
    "take_along_axis", emits=("take_along_axis_grad",),
    transpose=lambda g, dout, op: _take_grad(g, op.input("X"), op.input("Index"), dout, op.attr("axis")))
take_along_axis_tangent = linear_in("take_along_axis")
take_along_axis_grad_grad = linear(
    "take_along_axis_grad", emits=("take_along_axis",), slot="Out@GRAD", out="X@GRAD",
    transpose=lambda g, dd, op: g.op("take_along_axis", {"X": dd, "Index": op.input("Index")}, op.attrs))
take_along_axis_grad_tangent = linear_in("take_along_axis_grad", slot="Out@GRAD", out="X@GRAD")


@grad_maker("top_k", "sort", emits=("take_along_axis_grad",))
def top_k_grad(g, op):
    """Each chosen value's gradient goes back to the position it was taken from."""
    return {"X": _take_grad(g, op.input("X"), op.output("Indices"), op.grad("Out"), op.attr("axis"))}


@tangent_rule("top_k", "sort", emits=("take_along_axis",))
def top_k_tangent(g, op):
    t = op.tangent("X")
    if t is None:
        return {}
    return {"Out": g.op("take_along_axis", {"X": t, "Index": op.output("Indices")}, {"axis": op.attr("axis")})}


__all__ = ["scatter_grad", "scatter_add_grad", "scatter_tangent", "take_along_axis_grad", "take_along_axis_tangent",
           "take_along_axis_grad_grad", "take_along_axis_grad_tangent", "top_k_grad", "top_k_tangent"]
