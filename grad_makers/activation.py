"""Gradients of unary elementwise ops, each written with ordinary ops so they can be differentiated again.

Ops whose derivative is a mask (relu, leaky_relu, clip) use a fused grad op
that is linear in ``Out@GRAD``; its own maker (in ``grad_ops``) is one line.
"""
from __future__ import annotations

import math

from .base import OpDesc, grad_maker, op


def _unary(ctx, chain) -> list[OpDesc]:
    """Shared shape of a unary rule: ``chain(x, out, dout, dx)`` returns the ops writing dx."""
    (dx,) = ctx.input_grad("X")
    if dx is None:
        return []
    return chain(ctx.input("X")[0], ctx.output("Out")[0], ctx.output_grad("Out")[0], dx)


def _mul(a: str, b: str, out: str) -> OpDesc:
    return op("elementwise_mul", {"X": a, "Y": b}, {"Out": out})


def _scale(x: str, out: str, scale: float = 1.0, bias: float = 0.0) -> OpDesc:
    return op("scale", {"X": x}, {"Out": out}, scale=scale, bias=bias)


@grad_maker("exp", emits=("elementwise_mul",))
def exp_grad(fwd, ctx):
    return _unary(ctx, lambda x, out, dout, dx: [_mul(dout, out, dx)])


@grad_maker("log", emits=("elementwise_div",))
def log_grad(fwd, ctx):
    return _unary(ctx, lambda x, out, dout, dx: [op("elementwise_div", {"X": dout, "Y": x}, {"Out": dx})])


@grad_maker("reciprocal", emits=("square", "scale", "elementwise_mul"))
def reciprocal_grad(fwd, ctx):
    def chain(x, out, dout, dx):
        sq, neg = ctx.tmp("sq"), ctx.tmp("neg")
        return [op("square", {"X": out}, {"Out": sq}), _scale(sq, neg, -1.0), _mul(dout, neg, dx)]
    return _unary(ctx, chain)


@grad_maker("sqrt", emits=("scale", "elementwise_div"))
def sqrt_grad(fwd, ctx):
    def chain(x, out, dout, dx):
        two_out = ctx.tmp("two_out")
        return [_scale(out, two_out, 2.0), op("elementwise_div", {"X": dout, "Y": two_out}, {"Out": dx})]
    return _unary(ctx, chain)


@grad_maker("square", emits=("scale", "elementwise_mul"))
def square_grad(fwd, ctx):
    def chain(x, out, dout, dx):
        two_x = ctx.tmp("two_x")
        return [_scale(x, two_x, 2.0), _mul(dout, two_x, dx)]
    return _unary(ctx, chain)


@grad_maker("pow", emits=("pow", "scale", "elementwise_mul"))
def pow_grad(fwd, ctx):
    factor = fwd.attr("factor")

    def chain(x, out, dout, dx):
        p, d = ctx.tmp("pow"), ctx.tmp("dpow")
        return [op("pow", {"X": x}, {"Out": p}, factor=factor - 1.0), _scale(p, d, factor), _mul(dout, d, dx)]
    return _unary(ctx, chain)


@grad_maker("sigmoid", emits=("sigmoid_grad",))
def sigmoid_grad(fwd, ctx):
    return _unary(ctx, lambda x, out, dout, dx: [op("sigmoid_grad", {"Out": out, "Out@GRAD": dout}, {"X@GRAD": dx})])


@grad_maker("tanh", emits=("tanh_grad",))
def tanh_grad(fwd, ctx):
    return _unary(ctx, lambda x, out, dout, dx: [op("tanh_grad", {"Out": out, "Out@GRAD": dout}, {"X@GRAD": dx})])


@grad_maker("sin", emits=("cos", "elementwise_mul"))
def sin_grad(fwd, ctx):
    def chain(x, out, dout, dx):
        c = ctx.tmp("cos")
        return [op("cos", {"X": x}, {"Out": c}), _mul(dout, c, dx)]
    return _unary(ctx, chain)


@grad_maker("cos", emits=("sin", "scale", "elementwise_mul"))
def cos_grad(fwd, ctx):
    def chain(x, out, dout, dx):
        s, neg = ctx.tmp("sin"), ctx.tmp("neg_sin")
        return [op("sin", {"X": x}, {"Out": s}), _scale(s, neg, -1.0), _mul(dout, neg, dx)]
    return _unary(ctx, chain)


@grad_maker("abs", emits=("sign", "elementwise_mul"))
def abs_grad(fwd, ctx):
    def chain(x, out, dout, dx):
        s = ctx.tmp("sign")
        return [op("sign", {"X": x}, {"Out": s}), _mul(dout, s, dx)]
    return _unary(ctx, chain)


@grad_maker("softplus", emits=("sigmoid", "elementwise_mul"))
def softplus_grad(fwd, ctx):
    def chain(x, out, dout, dx):
        s = ctx.tmp("sigmoid")
        return [op("sigmoid", {"X": x}, {"Out": s}), _mul(dout, s, dx)]
    return _unary(ctx, chain)


@grad_maker("scale", emits=("scale",))
def scale_grad(fwd, ctx):
    return _unary(ctx, lambda x, out, dout, dx: [_scale(dout, dx, fwd.attr("scale"))])


@grad_maker("relu", emits=("relu_grad",))
def relu_grad(fwd, ctx):
    return _unary(ctx, lambda x, out, dout, dx: [op("relu_grad", {"Out": out, "Out@GRAD": dout}, {"X@GRAD": dx})])


@grad_maker("leaky_relu", emits=("leaky_relu_grad",))
def leaky_relu_grad(fwd, ctx):
    return _unary(ctx, lambda x, out, dout, dx: [
        op("leaky_relu_grad", {"X": x, "Out@GRAD": dout}, {"X@GRAD": dx}, alpha=fwd.attr("alpha"))])


@grad_maker("clip", emits=("clip_grad",))
def clip_grad(fwd, ctx):
    return _unary(ctx, lambda x, out, dout, dx: [
        op("clip_grad", {"X": x, "Out@GRAD": dout}, {"X@GRAD": dx}, min=fwd.attr("min"), max=fwd.attr("max"))])


@grad_maker("gelu", emits=("gelu_grad",))
def gelu_grad(fwd, ctx):
    return _unary(ctx, lambda x, out, dout, dx: [op("gelu_grad", {"X": x, "Out@GRAD": dout}, {"X@GRAD": dx})])


INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
