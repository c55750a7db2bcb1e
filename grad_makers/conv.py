"""Gradients of convolution and pooling: three bilinear conv ops and two pooling adjoints, closed under
differentiation."""
from __future__ import annotations

from .base import grad_maker
from .families import linear


def _conv(g, op, x, w):
    return g.op("conv2d", {"Input": x, "Filter": w}, op.attrs, outputs="Output")


def _input_grad(g, op, w, dout, x):
    return g.op("conv2d_input_grad", {"Filter": w, "Output@GRAD": dout, "Input": x}, op.attrs, outputs="Input@GRAD")


def _filter_grad(g, op, x, dout, w):
    return g.op("conv2d_filter_grad", {"Input": x, "Output@GRAD": dout, "Filter": w}, op.attrs, outputs="Filter@GRAD")


@grad_maker("conv2d", emits=("conv2d_input_grad", "conv2d_filter_grad"))
def conv2d_grad(g, op):
    x, w, dout = op.input("Input"), op.input("Filter"), op.grad("Output")
    return {"Input": _input_grad(g, op, w, dout, x), "Filter": _filter_grad(g, op, x, dout, w)}


@grad_maker("conv2d_input_grad", emits=("conv2d", "conv2d_filter_grad"))
def conv2d_input_grad_grad(g, op):
    """Input@GRAD = T(W)^T g: linear in g (adjoint: conv2d) and in W (adjoint: the filter gradient)."""
    w, gout, dd = op.input("Filter"), op.input("Output@GRAD"), op.grad("Input@GRAD")
    return {"Output@GRAD": _conv(g, op, dd, w), "Filter": _filter_grad(g, op, dd, gout, w)}


@grad_maker("conv2d_filter_grad", emits=("conv2d", "conv2d_input_grad"))
def conv2d_filter_grad_grad(g, op):
    """Filter@GRAD is linear in the input x (adjoint: the input gradient) and in g (adjoint: conv2d)."""
    x, gout, dd = op.input("Input"), op.input("Output@GRAD"), op.grad("Filter@GRAD")
    return {"Output@GRAD": _conv(g, op, x, dd), "Input": _input_grad(g, op, dd, gout, x)}


@grad_maker("conv2d_transpose", emits=("conv2d", "conv2d_filter_grad"))
def conv2d_transpose_grad(g, op):
    """Output = T(W)^T x, conv2d's adjoint in its input with W as a conv2d filter: in x the adjoint is conv2d
    itself; in W it is the filter gradient of conv2d with dout as the input and x as the output gradient."""
    x, w, dout = op.input("Input"), op.input("Filter"), op.grad("Output")
    attrs = {k: v for k, v in op.attrs.items() if k != "output_padding"}
    return {"Input": g.op("conv2d", {"Input": dout, "Filter": w}, attrs, outputs="Output"),
            "Filter": g.op("conv2d_filter_grad", {"Input": dout, "Output@GRAD": x, "Filter": w}, attrs,
                           outputs="Filter@GRAD")}


def _pool_adjoint(g, dout, op):
    """The adjoint of pooling X, applied to ``dout`` (pool2d_grad with the op's attrs)."""
    return g.op("pool2d_grad", {"X": op.input("X"), "Out@GRAD": dout}, op.attrs, outputs="X@GRAD")


pool2d_grad = linear("pool2d", emits=("pool2d_grad",), transpose=_pool_adjoint)
pool2d_grad_grad = linear(
    "pool2d_grad", emits=("pool2d", "pool2d_select"), slot="Out@GRAD", out="X@GRAD",
    transpose=lambda g, dd, op: g.op("pool2d", {"X": dd}, op.attrs) if op.attr("pooling_type") == "avg"
    else g.op("pool2d_select", {"X": op.input("X"), "D": dd}, op.attrs))
"""Linear in Out@GRAD: average pooling is its own adjoint; max's adjoint picks each window's argmax."""
pool2d_select_grad = linear("pool2d_select", emits=("pool2d_grad",), slot="D", transpose=_pool_adjoint)

__all__ = ["conv2d_grad", "conv2d_transpose_grad", "conv2d_input_grad_grad",
           "conv2d_filter_grad_grad", "pool2d_grad", "pool2d_grad_grad",
           "pool2d_select_grad"]
