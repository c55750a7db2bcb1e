"""Makers for the fused grad ops, so that a gradient can itself be differentiated.

Most fused grad ops are linear in ``Out@GRAD`` and use their other inputs only
as a mask or a shape; the gradient with respect to ``Out@GRAD`` is then the
adjoint linear map (often the same op), and the other inputs get none.
"""
from __future__ import annotations

from .activation import INV_SQRT_2PI
from .base import grad_maker, only_grad, op


def _dd(ctx) -> str:
    return ctx.output_grad("X@GRAD")[0]


@grad_maker("relu_grad", "leaky_relu_grad", "clip_grad", emits=("relu_grad", "leaky_relu_grad", "clip_grad"))
def masked_grad_grad(fwd, ctx):
    """Self-adjoint masks: the same op applied to the incoming gradient."""
    (g,) = ctx.input_grad("Out@GRAD")
    if g is None:
        return []
    inputs = {slot: names for slot, names in fwd.inputs.items()}
    inputs["Out@GRAD"] = [_dd(ctx)]
    return [op(fwd.type, inputs, {"X@GRAD": g}, **fwd.attrs)]


@grad_maker("tanh_grad", "sigmoid_grad", emits=("tanh_grad", "sigmoid_grad", "elementwise_mul", "scale"))
def output_slope_grad_grad(fwd, ctx):
    """dX = dOut * f'(Out) with f' = 1 - Out^2 (tanh) or Out (1 - Out) (sigmoid).

    In dOut the map is linear and self-adjoint: the same op on the incoming
    gradient ddX. In Out: ddX * dOut * f''(Out), with f'' = -2 Out or 1 - 2 Out.
    """
    out, dout = fwd.input("Out")[0], fwd.input("Out@GRAD")[0]
    (g_out,), (g_dout,) = ctx.input_grad("Out"), ctx.input_grad("Out@GRAD")
    descs = []
    if g_dout is not None:
        descs.append(op(fwd.type, {"Out": out, "Out@GRAD": _dd(ctx)}, {"X@GRAD": g_dout}))
    if g_out is not None:
        both, curve = ctx.tmp("dd_dout"), ctx.tmp("curvature")
        scale, bias = (-2.0, 0.0) if fwd.type == "tanh_grad" else (-2.0, 1.0)
        descs += [op("elementwise_mul", {"X": _dd(ctx), "Y": dout}, {"Out": both}),
                  op("scale", {"X": out}, {"Out": curve}, scale=scale, bias=bias),
                  op("elementwise_mul", {"X": both, "Y": curve}, {"Out": g_out})]
    return descs


@grad_maker("reduce_mean_grad", emits=("reduce_mean",))
def reduce_mean_grad_grad(fwd, ctx):
    return only_grad(ctx, "Out@GRAD", lambda g: [op("reduce_mean", {"X": _dd(ctx)}, {"Out": g}, **fwd.attrs)])


@grad_maker("slice_grad", emits=("slice",))
def slice_grad_grad(fwd, ctx):
    return only_grad(ctx, "Out@GRAD", lambda g: [op("slice", {"X": _dd(ctx)}, {"Out": g}, **fwd.attrs)])


@grad_maker("gather_grad", emits=("gather",))
def gather_grad_grad(fwd, ctx):
    return only_grad(ctx, "Out@GRAD", lambda g: [
        op("gather", {"X": _dd(ctx), "Index": ctx.input("Index")[0]}, {"Out": g}, **fwd.attrs)])


@grad_maker("split_like", emits=("concat",))
def split_like_grad(fwd, ctx):
    return only_grad(ctx, "X", lambda g: [
        op("concat", {"X": ctx.output_grad("Out")}, {"Out": g}, axis=fwd.attr("axis"))])


@grad_maker("gelu_grad", emits=("gelu_grad", "square", "scale", "exp", "elementwise_mul"))
def gelu_grad_grad(fwd, ctx):
    """gelu_grad = dout * (Phi(x) + x phi(x)); its x-derivative is dout * phi(x) * (2 - x^2)."""
    x, dout, dd = ctx.input("X")[0], ctx.input("Out@GRAD")[0], _dd(ctx)
    (gx,) = ctx.input_grad("X")
    (gdout,) = ctx.input_grad("Out@GRAD")
    descs = []
    if gdout is not None:
        descs.append(op("gelu_grad", {"X": x, "Out@GRAD": dd}, {"X@GRAD": gdout}))
    if gx is not None:
        sq, half, e, phi, two_minus, slope, s2 = (ctx.tmp(n) for n in ("sq", "half", "e", "phi", "two_minus",
                                                                       "slope", "slope2"))
        descs += [op("square", {"X": x}, {"Out": sq}), op("scale", {"X": sq}, {"Out": half}, scale=-0.5),
                  op("exp", {"X": half}, {"Out": e}), op("scale", {"X": e}, {"Out": phi}, scale=INV_SQRT_2PI),
                  op("scale", {"X": sq}, {"Out": two_minus}, scale=-1.0, bias=2.0),
                  op("elementwise_mul", {"X": phi, "Y": two_minus}, {"Out": slope}),
                  op("elementwise_mul", {"X": slope, "Y": dout}, {"Out": s2}),
                  op("elementwise_mul", {"X": s2, "Y": dd}, {"Out": gx})]
    return descs
