"""Tangents of convolution and pooling: the conv ops are bilinear (one term per moving operand); average
pooling is linear and max pooling moves with each window's argmax (``pool2d_select``)."""
from __future__ import annotations

from ..tangent_rules import tangent_rule, total


def _bilinear(a_slot: str, b_slot: str, out: str):
    """out = f(a, b), linear in each: d out = f(da, b) + f(a, db), the op's other inputs and attrs unchanged."""

    def rule(g, op):
        ta, tb = op.tangent(a_slot), op.tangent(b_slot)
        slots = op.input_slots()
        return {out: total(g, [ta and g.op(op.type, {**slots, a_slot: ta}, op.attrs, outputs=out),
                               tb and g.op(op.type, {**slots, b_slot: tb}, op.attrs, outputs=out)])}

    return rule


conv2d_tangent = tangent_rule("conv2d", emits=("conv2d", "elementwise_add"))(_bilinear("Input", "Filter", "Output"))
conv2d_transpose_tangent = tangent_rule("conv2d_transpose", emits=("conv2d_transpose", "elementwise_add"))(
    _bilinear("Input", "Filter", "Output"))
conv2d_input_grad_tangent = tangent_rule("conv2d_input_grad", emits=("conv2d_input_grad", "elementwise_add"))(
    _bilinear("Filter", "Output@GRAD", "Input@GRAD"))
conv2d_filter_grad_tangent = tangent_rule("conv2d_filter_grad", emits=("conv2d_filter_grad", "elementwise_add"))(
    _bilinear("Input", "Output@GRAD", "Filter@GRAD"))


@tangent_rule("pool2d", emits=("pool2d", "pool2d_select"))
def pool2d_tangent(g, op):
    t = op.tangent("X")
    if t is None:
        return {}
    if op.attr("pooling_type") == "avg":
        return {"Out": g.op("pool2d", {"X": t}, op.attrs)}
    return {"Out": g.op("pool2d_select", {"X": op.input("X"), "D": t}, op.attrs)}


__all__ = ["conv2d_tangent", "conv2d_transpose_tangent", "conv2d_input_grad_tangent", "conv2d_filter_grad_tangent",
           "pool2d_tangent"]
