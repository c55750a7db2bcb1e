"""Tangents of ops that move elements: every one is linear, so the tangent moves the same way."""
from __future__ import annotations

from ..tangent_rules import linear_in, tangent_rule, zeros_for_missing

moved_tangent = linear_in("assign", "cast", "broadcast_to", "reduce_as", "reshape", "squeeze", "unsqueeze",
                          "reshape_as", "transpose", "slice", "gather", "flatten", "tril", "triu")
"""The op itself on X's tangent (its other inputs are shapes or indices)."""


@tangent_rule("pad", emits=("pad",))
def pad_tangent(g, op):
    """The padding is a constant: the tangent is padded with zeros whatever ``pad_value`` is."""
    t = op.tangent("X")
    return {"Out": g.op("pad", {"X": t}, {**op.attrs, "pad_value": 0.0})} if t is not None else {}


@tangent_rule("split", "split_like", emits=("split", "split_like"))
def split_tangent(g, op):
    t = op.tangent("X")
    if t is None:
        return {}
    return g.op(op.type, {**op.input_slots(), "X": t}, op.attrs, outputs={"Out": len(op.outputs("Out"))})


@tangent_rule("concat", "stack", emits=("concat", "stack", "fill_zeros_like"))
def joined_tangent(g, op):
    """The pieces' tangents joined the same way, with zeros for pieces that have none."""
    xs, ts = op.inputs("X"), op.tangents("X")
    if all(t is None for t in ts):
        return {}
    return {"Out": g.op(op.type, {"X": zeros_for_missing(g, xs, ts)}, op.attrs)}


@tangent_rule("sum", emits=("sum",))
def sum_tangent(g, op):
    present = [t for t in op.tangents("X") if t is not None]
    if len(present) < 2:
        return {"Out": present[0] if present else None}
    return {"Out": g.op("sum", {"X": present})}


@tangent_rule("where", emits=("where", "fill_zeros_like"))
def where_tangent(g, op):
    tx, ty, out = op.tangent("X"), op.tangent("Y"), op.output("Out")
    if tx is None and ty is None:
        return {}
    tx, ty = zeros_for_missing(g, [out, out], [tx, ty])
    return {"Out": g.where(op.input("Condition"), tx, ty)}


__all__ = ["moved_tangent", "pad_tangent", "split_tangent", "joined_tangent", "sum_tangent", "where_tangent"]
