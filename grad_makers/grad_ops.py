"""Makers for the fused grad ops, so that a gradient can itself be differentiated.

Most fused grad ops are linear in ``Out@GRAD`` and use their other inputs only
as a mask or a shape; the gradient with respect to ``Out@GRAD`` is then the
adjoint linear map (often the same op), and the other inputs get none. Their
tangents (so a gradient can be pushed forward: forward-over-reverse) are the
same op on ``Out@GRAD``'s tangent; ``softmax_grad`` also moves with the
value its slope reads. The activations' fused grads have their makers beside
their forward makers, in ``activation.py``.
"""
from __future__ import annotations

from .base import grad_maker
from .families import linear
from .tangent_rules import linear_in, tangent_rule, total


def _adjoint(op_type: str, *other_inputs: str):
    """The incoming gradient ``dd`` through ``op_type(X=dd, <other inputs of the grad op>)`` with its attrs."""
    return lambda g, dd, op: g.op(op_type, {"X": dd, **{s: op.input(s) for s in other_inputs}}, op.attrs)


def _linear_in_dout(*op_types: str, emits: tuple[str, ...], transpose):
    return linear(*op_types, emits=emits, transpose=transpose, slot="Out@GRAD", out="X@GRAD")


reduce_mean_grad_grad = _linear_in_dout("reduce_mean_grad", emits=("reduce_mean",), transpose=_adjoint("reduce_mean"))
slice_grad_grad = _linear_in_dout("slice_grad", emits=("slice",), transpose=_adjoint("slice"))
gather_grad_grad = _linear_in_dout("gather_grad", emits=("gather",), transpose=_adjoint("gather", "Index"))
linear_in_dout_tangent = linear_in("reduce_mean_grad", "slice_grad", "gather_grad", slot="Out@GRAD", out="X@GRAD")


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


__all__ = ["reduce_mean_grad_grad", "slice_grad_grad", "gather_grad_grad", "linear_in_dout_tangent", "split_like_grad",
           "split_like_tangent", "softmax_grad_grad", "softmax_grad_tangent"]
