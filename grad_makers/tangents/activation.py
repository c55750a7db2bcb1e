"""Tangents of unary elementwise ops, reusing the reverse rules: an elementwise Jacobian is diagonal, so
``J t`` is ``J^T t`` and the formula the grad maker applies to ``dout`` applies to the input's tangent."""
from __future__ import annotations

from .. import activation as reverse
from ..tangent_rules import diagonal, slope, tangent_rule

exp_tangent = slope(reverse.exp_grad)
reciprocal_tangent = slope(reverse.reciprocal_grad)
square_tangent = slope(reverse.square_grad)
pow_tangent = slope(reverse.pow_grad)
sin_tangent = slope(reverse.sin_grad)
cos_tangent = slope(reverse.cos_grad)
abs_tangent = slope(reverse.abs_grad)
softplus_tangent = slope(reverse.softplus_grad)

log_tangent = diagonal(reverse.log_grad)
sqrt_tangent = diagonal(reverse.sqrt_grad)
sigmoid_tangent = diagonal(reverse.sigmoid_grad)
tanh_tangent = diagonal(reverse.tanh_grad)
relu_tangent = diagonal(reverse.relu_grad)
leaky_relu_tangent = diagonal(reverse.leaky_relu_grad)
clip_tangent = diagonal(reverse.clip_grad)
gelu_tangent = diagonal(reverse.gelu_grad)


@tangent_rule("scale", emits=("scale",))
def scale_tangent(g, op):
    """scale * x + bias moves by scale * dx: the bias drops out."""
    t = op.tangent("X")
    return {"Out": g.scale(t, op.attr("scale"))} if t is not None else {}


__all__ = ["exp_tangent", "reciprocal_tangent", "square_tangent", "pow_tangent", "sin_tangent",
           "cos_tangent", "abs_tangent", "softplus_tangent", "log_tangent", "sqrt_tangent", "sigmoid_tangent", "tanh_tangent",
           "relu_tangent", "leaky_relu_tangent", "clip_tangent", "gelu_tangent", "scale_tangent"]
