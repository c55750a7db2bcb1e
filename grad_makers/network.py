"""Gradients of dropout and lookup_table, written with ordinary ops (batch_norm's: ``normalization``)."""
from __future__ import annotations

from .families import linear

dropout_grad = linear("dropout", emits=("elementwise_mul",),
                      transpose=lambda g, dout, op: g.mul(dout, op.output("Mask")))
"""dX = dOut * Mask: the forward's mask is reused, never resampled."""

lookup_table_grad = linear("lookup_table", emits=("gather_grad",), slot="W", transpose=lambda g, dout, op: g.op(
    "gather_grad", {"X": op.input("W"), "Index": op.input("Ids"), "Out@GRAD": dout}, {"axis": 0}, outputs="X@GRAD"))
"""Rows of dW get the gradients of every lookup of them (repeated ids accumulate)."""


__all__ = ["dropout_grad", "lookup_table_grad"]
