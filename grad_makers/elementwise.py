"""Gradients of binary elementwise ops with broadcasting: each input's gradient is summed back to its shape."""
from __future__ import annotations

from .base import OpDesc, grad_maker, op, summed_back


def _binary(fwd, ctx, rules) -> list[OpDesc]:
    """``rules[slot](target, x, y, out, dout)`` builds the full-shape gradient of ``slot`` into ``target``.

    A rule of None means the gradient is ``dout`` itself: an ``assign`` (which
    shares the array) when no broadcast happened, else just the ``reduce_as``.
    """
    x, y, out = ctx.input("X")[0], ctx.input("Y")[0], ctx.output("Out")[0]
    dout = ctx.output_grad("Out")[0]
    full = ctx.var_type(out).shape
    descs = []
    for slot, like in (("X", x), ("Y", y)):
        (grad,) = ctx.input_grad(slot)
        if grad is None:
            continue
        rule = rules[slot]
        if rule is None:
            same = tuple(ctx.var_type(like).shape) == tuple(full)
            descs.append(op("assign", {"X": dout}, {"Out": grad}) if same
                         else op("reduce_as", {"X": dout, "Target": like}, {"Out": grad}))
        else:
            descs += summed_back(ctx, full, like, grad, lambda t, r=rule: r(t, x, y, out, dout))
    return descs


def _mul(a, b, out):
    return op("elementwise_mul", {"X": a, "Y": b}, {"Out": out})


def _div(a, b, out):
    return op("elementwise_div", {"X": a, "Y": b}, {"Out": out})


@grad_maker("elementwise_add", emits=("assign", "reduce_as"))
def add_grad(fwd, ctx):
    return _binary(fwd, ctx, {"X": None, "Y": None})


@grad_maker("elementwise_sub", emits=("assign", "scale", "reduce_as"))
def sub_grad(fwd, ctx):
    return _binary(fwd, ctx, {"X": None, "Y": lambda t, x, y, o, d: [op("scale", {"X": d}, {"Out": t}, scale=-1.0)]})


@grad_maker("elementwise_mul", emits=("elementwise_mul", "reduce_as"))
def mul_grad(fwd, ctx):
    return _binary(fwd, ctx, {"X": lambda t, x, y, o, d: [_mul(d, y, t)],
                              "Y": lambda t, x, y, o, d: [_mul(d, x, t)]})


@grad_maker("elementwise_div", emits=("elementwise_div", "elementwise_mul", "scale", "reduce_as"))
def div_grad(fwd, ctx):
    def dy(t, x, y, o, d):
        q, p = ctx.tmp("dout_over_y"), ctx.tmp("prod")
        return [_div(d, y, q), _mul(q, o, p), op("scale", {"X": p}, {"Out": t}, scale=-1.0)]

    return _binary(fwd, ctx, {"X": lambda t, x, y, o, d: [_div(d, y, t)], "Y": dy})


@grad_maker("elementwise_pow", emits=("scale", "elementwise_pow", "elementwise_mul", "log", "reduce_as"))
def pow_grad(fwd, ctx):
    def dx(t, x, y, o, d):
        ym1, p, s = ctx.tmp("y_minus_1"), ctx.tmp("pow"), ctx.tmp("slope")
        return [op("scale", {"X": y}, {"Out": ym1}, bias=-1.0), op("elementwise_pow", {"X": x, "Y": ym1}, {"Out": p}),
                _mul(p, y, s), _mul(d, s, t)]

    def dy(t, x, y, o, d):
        lg, s = ctx.tmp("log_x"), ctx.tmp("slope")
        return [op("log", {"X": x}, {"Out": lg}), _mul(o, lg, s), _mul(d, s, t)]

    return _binary(fwd, ctx, {"X": dx, "Y": dy})


def _masked(compare_x: str, compare_y: str):
    """max/min: the gradient goes to the input that won (ties to X), through a 0/1 mask."""
    def maker(fwd, ctx):
        dtype = ctx.var_type(ctx.input("X")[0]).dtype

        def rule(compare):
            def build(t, x, y, o, d):
                m, mf = ctx.tmp("mask"), ctx.tmp("mask_f")
                return [op(compare, {"X": x, "Y": y}, {"Out": m}), op("cast", {"X": m}, {"Out": mf}, out_dtype=dtype),
                        _mul(d, mf, t)]
            return build

        return _binary(fwd, ctx, {"X": rule(compare_x), "Y": rule(compare_y)})

    return maker


maximum_grad = grad_maker("elementwise_max", emits=("greater_equal", "less_than", "cast", "elementwise_mul", "reduce_as"))(
    _masked("greater_equal", "less_than"))
minimum_grad = grad_maker("elementwise_min", emits=("less_equal", "greater_than", "cast", "elementwise_mul", "reduce_as"))(
    _masked("less_equal", "greater_than"))
