"""Makers for the fused grad ops, so that a gradient can itself be differentiated.

Most fused grad ops are linear in ``Out@GRAD`` and use their other inputs only
as a mask or a shape; the gradient with respect to ``Out@GRAD`` is then the
adjoint linear map (often the same op), and the other inputs get none. Their
tangents (so a gradient can be pushed forward: forward-over-reverse) are the
same op on ``Out@GRAD``'s tangent; the output-slope ops (``tanh_grad``,
``sigmoid_grad``, ``gelu_grad``) and ``softmax_grad`` also move with the
value their slope reads.
"""
from __future__ import annotations

from .activation import INV_SQRT_2PI
from .base import grad_maker
from .families import linear
from .tangent_rules import linear_in, tangent_rule, total


def _adjoint(op_type: str, *other_inputs: str):
    """The incoming gradient ``dd`` through ``op_type(X=dd, <other inputs of the grad op>)`` with its attrs."""
    return lambda g, dd, op: g.op(op_type, {"X": dd, **{s: op.input(s) for s in other_inputs}}, op.attrs)


def _linear_in_dout(*op_types: str, emits: tuple[str, ...], transpose):
    return linear(*op_types, emits=emits, transpose=transpose, slot="Out@GRAD", out="X@GRAD")


masked_grad_grad = _linear_in_dout(
    "relu_grad", "leaky_relu_grad", "clip_grad", emits=("relu_grad", "leaky_relu_grad", "clip_grad"),
    transpose=lambda g, dd, op: g.op(op.type, {**op.input_slots(), "Out@GRAD": dd}, op.attrs, outputs="X@GRAD"))
"""Self-adjoint masks: the same op applied to the incoming gradient."""
reduce_mean_grad_grad = _linear_in_dout("reduce_mean_grad", emits=("reduce_mean",), transpose=_adjoint("reduce_mean"))
slice_grad_grad = _linear_in_dout("slice_grad", emits=("slice",), transpose=_adjoint("slice"))
gather_grad_grad = _linear_in_dout("gather_grad", emits=("gather",), transpose=_adjoint("gather", "Index"))
linear_in_dout_tangent = linear_in("relu_grad", "leaky_relu_grad", "clip_grad", "reduce_mean_grad", "slice_grad",
                                   "gather_grad", slot="Out@GRAD", out="X@GRAD")


@grad_maker("split_like", emits=("concat",))
def split_like_grad(g, op):
    return {"X": g.concat(op.grads("Out"), op.attr("axis"))}


split_like_tangent = linear_in("split_like")


@grad_maker("softmax_grad", emits=("softmax_grad", "reduce_sum", "elementwise_mul", "elementwise_sub"))
def softmax_grad_grad(g, op):
    """dX = y * (dy - sum(dy * y)) with y = Out. It is self-adjoint in dy (softmax's Jacobian is symmetric):
    the same op on the incoming ddX; in y: ddX * (dy - sum(dy * y)) - dy * sum(ddX * y)."""
    y, dy, dd, axis = op.input("Out"), op.input("Out@GRAD"), op.grad("X@GRAD"), [op.attr("axis")]
    return {"Out@GRAD": g.op("softmax_grad", {"Out": y, "Out@GRAD": dd}, op.attrs, outputs="X@GRAD"),
            "Out": g.sub(g.mul(dd, g.sub(dy, g.reduce_sum(g.mul(dy, y), axis, keep_dim=True))),
                         g.mul(dy, g.reduce_sum(g.mul(dd, y), axis, keep_dim=True)))}


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


@grad_maker("tanh_grad", "sigmoid_grad", emits=("tanh_grad", "sigmoid_grad", "elementwise_mul", "scale"))
def output_slope_grad_grad(g, op):
    """dX = dOut * f'(Out) with f' = 1 - Out^2 (tanh) or Out (1 - Out) (sigmoid).

    In dOut the map is linear and self-adjoint: the same op on the incoming
    gradient ddX. In Out: ddX * dOut * f''(Out), with f'' = -2 Out or 1 - 2 Out.
    """
    out, dout, dd = op.input("Out"), op.input("Out@GRAD"), op.grad("X@GRAD")
    curvature = g.scale(out, -2.0, 0.0 if op.type == "tanh_grad" else 1.0)
    return {"Out@GRAD": g.op(op.type, {"Out": out, "Out@GRAD": dd}, outputs="X@GRAD"),
            "Out": g.mul(g.mul(dd, dout), curvature)}


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


@grad_maker("gelu_grad", emits=("gelu_grad", "square", "scale", "exp", "elementwise_mul"))
def gelu_grad_grad(g, op):
    """gelu_grad = dout * (Phi(x) + x phi(x)); its x-derivative is dout * phi(x) * (2 - x^2)."""
    x, dout, dd = op.input("X"), op.input("Out@GRAD"), op.grad("X@GRAD")
    sq = g.square(x)
    slope = g.mul(g.scale(g.exp(g.scale(sq, -0.5)), INV_SQRT_2PI), g.scale(sq, -1.0, 2.0))
    return {"Out@GRAD": g.op("gelu_grad", {"X": x, "Out@GRAD": dd}, outputs="X@GRAD"),
            "X": g.mul(g.mul(slope, dout), dd)}


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


__all__ = ["masked_grad_grad", "reduce_mean_grad_grad", "slice_grad_grad", "gather_grad_grad", "linear_in_dout_tangent",
           "split_like_grad", "split_like_tangent", "output_slope_grad_grad", "output_slope_tangent", "gelu_grad_grad",
           "gelu_grad_tangent", "softmax_grad_grad", "softmax_grad_tangent"]
