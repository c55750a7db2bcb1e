"""Gradients and tangents of convolution and pooling: three bilinear conv ops and two pooling adjoints, closed
under differentiation.

The conv ops' tangents have one term per moving operand (each is bilinear);
average pooling is linear and max pooling moves with each window's argmax
(``pool2d_select``).
"""
from __future__ import annotations

from .base import grad_maker
from .families import linear
from .tangent_rules import linear_in, tangent_rule, total


def _conv(g, op, x, w):
    return g.op("conv2d", {"Input": x, "Filter": w}, op.attrs, outputs="Output")


def _input_grad(g, op, w, dout, x):
    return g.op("conv2d_input_grad", {"Filter": w, "Output@GRAD": dout, "Input": x}, op.attrs, outputs="Input@GRAD")


def _filter_grad(g, op, x, dout, w):
    return g.op("conv2d_filter_grad", {"Input": x, "Output@GRAD": dout, "Filter": w}, op.attrs, outputs="Filter@GRAD")


def _bilinear(*op_types: str, a_slot: str, b_slot: str, out: str):
    """The tangent rule of out = f(a, b), linear in each: d out = f(da, b) + f(a, db), the op's other inputs and
    attrs unchanged."""

    def rule(g, op):
        ta, tb = op.tangent(a_slot), op.tangent(b_slot)
        slots = op.input_slots()
        return {out: total(g, [ta and g.op(op.type, {**slots, a_slot: ta}, op.attrs, outputs=out),
                               tb and g.op(op.type, {**slots, b_slot: tb}, op.attrs, outputs=out)])}

    return tangent_rule(*op_types, emits=(*op_types, "elementwise_add"))(rule)


@grad_maker("conv2d", emits=("conv2d_input_grad", "conv2d_filter_grad"))
def conv2d_grad(g, op):
    x, w, dout = op.input("Input"), op.input("Filter"), op.grad("Output")
    return {"Input": _input_grad(g, op, w, dout, x), "Filter": _filter_grad(g, op, x, dout, w)}


conv2d_tangent = _bilinear("conv2d", a_slot="Input", b_slot="Filter", out="Output")


@grad_maker("conv2d_input_grad", emits=("conv2d", "conv2d_filter_grad"))
def conv2d_input_grad_grad(g, op):
    """Input@GRAD = T(W)^T g: linear in g (adjoint: conv2d) and in W (adjoint: the filter gradient)."""
    w, gout, dd = op.input("Filter"), op.input("Output@GRAD"), op.grad("Input@GRAD")
    return {"Output@GRAD": _conv(g, op, dd, w), "Filter": _filter_grad(g, op, dd, gout, w)}


conv2d_input_grad_tangent = _bilinear("conv2d_input_grad", a_slot="Filter", b_slot="Output@GRAD", out="Input@GRAD")


@grad_maker("conv2d_filter_grad", emits=("conv2d", "conv2d_input_grad"))
def conv2d_filter_grad_grad(g, op):
    """Filter@GRAD is linear in the input x (adjoint: the input gradient) and in g (adjoint: conv2d)."""
    x, gout, dd = op.input("Input"), op.input("Output@GRAD"), op.grad("Filter@GRAD")
    return {"Output@GRAD": _conv(g, op, x, dd), "Input": _input_grad(g, op, dd, gout, x)}


conv2d_filter_grad_tangent = _bilinear("conv2d_filter_grad", a_slot="Input", b_slot="Output@GRAD",
                                       out="Filter@GRAD")


@grad_maker("conv2d_transpose", emits=("conv2d", "conv2d_filter_grad"))
def conv2d_transpose_grad(g, op):
    """Output = T(W)^T x, conv2d's adjoint in its input with W as a conv2d filter: in x the adjoint is conv2d
    itself; in W it is the filter gradient of conv2d with dout as the input and x as the output gradient."""
    x, w, dout = op.input("Input"), op.input("Filter"), op.grad("Output")
    attrs = {k: v for k, v in op.attrs.items() if k != "output_padding"}
    return {"Input": g.op("conv2d", {"Input": dout, "Filter": w}, attrs, outputs="Output"),
            "Filter": g.op("conv2d_filter_grad", {"Input": dout, "Output@GRAD": x, "Filter": w}, attrs,
                           outputs="Filter@GRAD")}


conv2d_transpose_tangent = _bilinear("conv2d_transpose", a_slot="Input", b_slot="Filter", out="Output")


def _pool_adjoint(g, dout, op):
    """The adjoint of pooling X, applied to ``dout`` (pool2d_grad with the op's attrs)."""
    return g.op("pool2d_grad", {"X": op.input("X"), "Out@GRAD": dout}, op.attrs, outputs="X@GRAD")


def _pooled(g, v, op):
    """``v`` (shaped like X) pooled as the op pools X, a linear map: averaged over each window, or taken at each
    window's argmax of X (``pool2d_select``)."""
    if op.attr("pooling_type") == "avg":
        return g.op("pool2d", {"X": v}, op.attrs)
    return g.op("pool2d_select", {"X": op.input("X"), "D": v}, op.attrs)


pool2d_grad = linear("pool2d", emits=("pool2d_grad",), transpose=_pool_adjoint)


@tangent_rule("pool2d", emits=("pool2d", "pool2d_select"))
def pool2d_tangent(g, op):
    t = op.tangent("X")
    return {"Out": _pooled(g, t, op)} if t is not None else {}


pool2d_grad_grad = linear("pool2d_grad", emits=("pool2d", "pool2d_select"), slot="Out@GRAD", out="X@GRAD",
                          transpose=lambda g, dd, op: _pooled(g, dd, op))
"""Linear in Out@GRAD: average pooling is its own adjoint; max's adjoint picks each window's argmax."""
pool2d_grad_tangent = linear_in("pool2d_grad", slot="Out@GRAD", out="X@GRAD")
pool2d_select_grad = linear("pool2d_select", emits=("pool2d_grad",), slot="D", transpose=_pool_adjoint)
pool2d_select_tangent = linear_in("pool2d_select", slot="D")

__all__ = ["conv2d_grad", "conv2d_tangent", "conv2d_transpose_grad", "conv2d_transpose_tangent",
           "conv2d_input_grad_grad", "conv2d_input_grad_tangent", "conv2d_filter_grad_grad",
           "conv2d_filter_grad_tangent", "pool2d_grad", "pool2d_tangent", "pool2d_grad_grad", "pool2d_grad_tangent",
           "pool2d_select_grad", "pool2d_select_tangent"]
