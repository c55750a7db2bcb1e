"""Gradients and tangents of dropout and lookup_table, written with ordinary ops (batch_norm's:
``normalization``)."""
from __future__ import annotations

from .families import linear
from .tangent_rules import linear_in, tangent_rule

dropout_grad = linear("dropout", emits=("elementwise_mul",),
                      transpose=lambda g, dout, op: g.mul(dout, op.output("Mask")))
"""dX = dOut * Mask: the forward's mask is reused, never resampled."""


@tangent_rule("dropout", emits=("elementwise_mul",))
def dropout_tangent(g, op):
    """dOut = dX * Mask: the forward's mask, never resampled; the mask itself has no tangent."""
    t = op.tangent("X")
    return {"Out": g.mul(t, op.output("Mask"))} if t is not None else {}



lookup_table_grad = linear("lookup_table", emits=("gather_grad",), slot="W", transpose=lambda g, dout, op: g.op(
    "gather_grad", {"X": op.input("W"), "Index": op.input("Ids"), "Out@GRAD": dout}, {"axis": 0}, outputs="X@GRAD"))
"""Rows of dW get the gradients of every lookup of them (repeated ids accumulate)."""
lookup_table_tangent = linear_in("lookup_table", slot="W")


__all__ = ["dropout_grad", "dropout_tangent", "lookup_table_grad", "lookup_table_tangent"]
