"""Tangents of the integer-position ops: each is linear in its float inputs, so the tangent is the same
movement of the tangents (zeros standing in for an input without one); top_k's values move with the
elements it chose, and so do sort's (ties: the lower index, as the kernel and the reverse rule choose)."""
from __future__ import annotations

from ..tangent_rules import linear_in, tangent_rule, zeros_for_missing

take_along_axis_tangent = linear_in("take_along_axis")
take_along_axis_grad_tangent = linear_in("take_along_axis_grad", slot="Out@GRAD", out="X@GRAD")


@tangent_rule("scatter", "scatter_add", emits=("scatter", "scatter_add", "fill_zeros_like"))
def scatter_tangent(g, op):
    """The same scatter of the updates' tangent into X's tangent; scatter_add with only X moving is X's."""
    x, updates = op.input("X"), op.input("Updates")
    tx, tu = op.tangent("X"), op.tangent("Updates")
    if tu is None and (tx is None or op.type == "scatter_add"):
        return {"Out": tx}
    tx, tu = zeros_for_missing(g, [x, updates], [tx, tu])
    return {"Out": g.op(op.type, {"X": tx, "Index": op.input("Index"), "Updates": tu}, op.attrs)}


@tangent_rule("top_k", "sort", emits=("take_along_axis",))
def top_k_tangent(g, op):
    t = op.tangent("X")
    if t is None:
        return {}
    return {"Out": g.op("take_along_axis", {"X": t, "Index": op.output("Indices")}, {"axis": op.attr("axis")})}


__all__ = ["take_along_axis_tangent", "take_along_axis_grad_tangent", "scatter_tangent", "top_k_tangent"]
