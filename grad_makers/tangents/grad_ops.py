"""Tangents of the fused grad ops, so a gradient can be pushed forward (forward-over-reverse).

Most are linear in ``Out@GRAD`` and use their other inputs only as a mask or a
shape: the tangent is the same op on ``Out@GRAD``'s tangent. The output-slope
ops (``tanh_grad``, ``sigmoid_grad``, ``gelu_grad``) also move with the value
their slope reads.
"""
from __future__ import annotations

from ..activation import INV_SQRT_2PI
from ..tangent_rules import linear_in, tangent_rule, total

masked_tangent = linear_in("relu_grad", "leaky_relu_grad", "clip_grad", "reduce_mean_grad", "slice_grad",
                           "gather_grad", "pool2d_grad", slot="Out@GRAD", out="X@GRAD")
pool2d_select_tangent = linear_in("pool2d_select", slot="D")


@tangent_rule("tanh_grad", "sigmoid_grad", emits=("tanh_grad", "sigmoid_grad", "elementwise_mul", "scale",
                                                  "elementwise_add"))
def output_slope_tangent(g, op):
    """X@GRAD = dOut * f'(Out): the same op on dOut's tangent, plus dOut * f''(Out) * Out's tangent,
    f'' = -2 Out (tanh) or 1 - 2 Out (sigmoid) as functions of Out."""
    out, dout = op.input("Out"), op.input("Out@GRAD")
    t_out, t_dout = op.tangent("Out"), op.tangent("Out@GRAD")
    curvature = t_out and g.scale(out, -2.0, 0.0 if op.type == "tanh_grad" else 1.0)
    return {"X@GRAD": total(g, [t_dout and g.op(op.type, {"Out": out, "Out@GRAD": t_dout}, outputs="X@GRAD"),
                                t_out and g.mul(g.mul(t_out, dout), curvature)])}


@tangent_rule("gelu_grad", emits=("gelu_grad", "square", "scale", "exp", "elementwise_mul", "elementwise_add"))
def gelu_grad_tangent(g, op):
    """gelu_grad = dOut * gelu'(x), with gelu''(x) = phi(x) * (2 - x^2)."""
    x, dout, tx, t_dout = op.input("X"), op.input("Out@GRAD"), op.tangent("X"), op.tangent("Out@GRAD")
    through_x = None
    if tx is not None:
        sq = g.square(x)
        curvature = g.mul(g.scale(g.exp(g.scale(sq, -0.5)), INV_SQRT_2PI), g.scale(sq, -1.0, 2.0))
        through_x = g.mul(g.mul(curvature, dout), tx)
    return {"X@GRAD": total(g, [t_dout and g.op("gelu_grad", {"X": x, "Out@GRAD": t_dout}, outputs="X@GRAD"),
                                through_x])}


@tangent_rule("softmax_grad", emits=("softmax_grad", "reduce_sum", "elementwise_mul", "elementwise_sub",
                                     "elementwise_add"))
def softmax_grad_tangent(g, op):
    """X@GRAD = y * (dy - sum(dy * y)): the same op on dy's tangent, plus y's tangent t moving it by
    t * (dy - sum(dy * y)) - y * sum(dy * t)."""
    y, dy, ty, t_dy, axis = op.input("Out"), op.input("Out@GRAD"), op.tangent("Out"), op.tangent("Out@GRAD"), \
        [op.attr("axis")]
    through_y = ty and g.sub(g.mul(ty, g.sub(dy, g.reduce_sum(g.mul(dy, y), axis, keep_dim=True))),
                             g.mul(y, g.reduce_sum(g.mul(dy, ty), axis, keep_dim=True)))
    return {"X@GRAD": total(g, [t_dy and g.op("softmax_grad", {"Out": y, "Out@GRAD": t_dy}, op.attrs,
                                              outputs="X@GRAD"), through_y])}


__all__ = ["softmax_grad_tangent", "masked_tangent", "pool2d_select_tangent", "output_slope_tangent",
           "gelu_grad_tangent"]
