"""Gradients of convolution and pooling: three bilinear conv ops and two pooling adjoints close under differentiation."""
from __future__ import annotations

from .base import grad_maker, only_grad, op


@grad_maker("conv2d", emits=("conv2d_input_grad", "conv2d_filter_grad"))
def conv2d_grad(fwd, ctx):
    x, w, dout = ctx.input("Input")[0], ctx.input("Filter")[0], ctx.output_grad("Output")[0]
    (dx,) = ctx.input_grad("Input")
    (dw,) = ctx.input_grad("Filter")
    descs = []
    if dx is not None:
        descs.append(op("conv2d_input_grad", {"Filter": w, "Output@GRAD": dout, "Input": x}, {"Input@GRAD": dx},
                        **fwd.attrs))
    if dw is not None:
        descs.append(op("conv2d_filter_grad", {"Input": x, "Output@GRAD": dout, "Filter": w}, {"Filter@GRAD": dw},
                        **fwd.attrs))
    return descs


@grad_maker("conv2d_input_grad", emits=("conv2d", "conv2d_filter_grad"))
def conv2d_input_grad_grad(fwd, ctx):
    """Input@GRAD = T(W)^T g: linear in g (adjoint: conv2d) and in W (adjoint: the filter gradient)."""
    w, g, dd = ctx.input("Filter")[0], ctx.input("Output@GRAD")[0], ctx.output_grad("Input@GRAD")[0]
    (dg,) = ctx.input_grad("Output@GRAD")
    (dw,) = ctx.input_grad("Filter")
    descs = []
    if dg is not None:
        descs.append(op("conv2d", {"Input": dd, "Filter": w}, {"Output": dg}, **fwd.attrs))
    if dw is not None:
        descs.append(op("conv2d_filter_grad", {"Input": dd, "Output@GRAD": g, "Filter": w}, {"Filter@GRAD": dw},
                        **fwd.attrs))
    return descs


@grad_maker("conv2d_filter_grad", emits=("conv2d", "conv2d_input_grad"))
def conv2d_filter_grad_grad(fwd, ctx):
    """Filter@GRAD is linear in the input x (adjoint: the input gradient) and in g (adjoint: conv2d)."""
    x, g, dd = ctx.input("Input")[0], ctx.input("Output@GRAD")[0], ctx.output_grad("Filter@GRAD")[0]
    (dg,) = ctx.input_grad("Output@GRAD")
    (dx,) = ctx.input_grad("Input")
    descs = []
    if dg is not None:
        descs.append(op("conv2d", {"Input": x, "Filter": dd}, {"Output": dg}, **fwd.attrs))
    if dx is not None:
        descs.append(op("conv2d_input_grad", {"Filter": dd, "Output@GRAD": g, "Input": x}, {"Input@GRAD": dx},
                        **fwd.attrs))
    return descs


@grad_maker("pool2d", emits=("pool2d_grad",))
def pool2d_grad(fwd, ctx):
    return only_grad(ctx, "X", lambda dx: [
        op("pool2d_grad", {"X": ctx.input("X")[0], "Out@GRAD": ctx.output_grad("Out")[0]}, {"X@GRAD": dx},
           **fwd.attrs)])


@grad_maker("pool2d_grad", emits=("pool2d", "pool2d_select"))
def pool2d_grad_grad(fwd, ctx):
    """Linear in Out@GRAD: average pooling is its own adjoint; max's adjoint picks each window's argmax."""
    (dg,) = ctx.input_grad("Out@GRAD")
    if dg is None:
        return []
    dd = ctx.output_grad("X@GRAD")[0]
    if fwd.attr("pooling_type") == "avg":
        return [op("pool2d", {"X": dd}, {"Out": dg}, **fwd.attrs)]
    return [op("pool2d_select", {"X": ctx.input("X")[0], "D": dd}, {"Out": dg}, **fwd.attrs)]


@grad_maker("pool2d_select", emits=("pool2d_grad",))
def pool2d_select_grad(fwd, ctx):
    (dd,) = ctx.input_grad("D")
    if dd is None:
        return []
    return [op("pool2d_grad", {"X": ctx.input("X")[0], "Out@GRAD": ctx.output_grad("Out")[0]}, {"X@GRAD": dd},
               **fwd.attrs)]
