"""Tangents of unary elementwise ops, reusing the reverse rules: an elementwise Jacobian is diagonal, so
``J t`` is ``J^T t`` and the formula the grad maker applies to ``dout`` applies to the input's tangent."""
from __future__ import annotations

from .. import activation as reverse
from .base import by_name, tangent_rule


def _slope(maker):
    """``dout = f'(x) * dx`` with the slope the grad maker keeps (from the input or from the output)."""
    slope, of_output = maker.slope, maker.slope_of == "Out"

    def rule(g, op):
        t = op.tangent("X")
        if t is None:
            return {}
        v = op.output("Out") if of_output else op.input("X")
        return {"Out": g.mul(t, slope(g, v, **by_name(slope, 2, op)))}

    return tangent_rule(*maker.grad_of, emits=maker.emits)(rule)


def _diagonal(maker):
    """The grad maker's ``rule(g, x, out, dout)`` applied to the tangent in place of ``dout``."""
    formula = maker.rule

    def rule(g, op):
        t = op.tangent("X")
        if t is None:
            return {}
        return {"Out": formula(g, op.input("X"), op.output("Out"), t, **by_name(formula, 4, op))}

    return tangent_rule(*maker.grad_of, emits=maker.emits)(rule)


exp_tangent = _slope(reverse.exp_grad)
reciprocal_tangent = _slope(reverse.reciprocal_grad)
square_tangent = _slope(reverse.square_grad)
pow_tangent = _slope(reverse.pow_grad)
sin_tangent = _slope(reverse.sin_grad)
cos_tangent = _slope(reverse.cos_grad)
abs_tangent = _slope(reverse.abs_grad)
softplus_tangent = _slope(reverse.softplus_grad)

log_tangent = _diagonal(reverse.log_grad)
sqrt_tangent = _diagonal(reverse.sqrt_grad)
sigmoid_tangent = _diagonal(reverse.sigmoid_grad)
tanh_tangent = _diagonal(reverse.tanh_grad)
relu_tangent = _diagonal(reverse.relu_grad)
leaky_relu_tangent = _diagonal(reverse.leaky_relu_grad)
clip_tangent = _diagonal(reverse.clip_grad)
gelu_tangent = _diagonal(reverse.gelu_grad)


@tangent_rule("scale", emits=("scale",))
def scale_tangent(g, op):
    """scale * x + bias moves by scale * dx: the bias drops out."""
    t = op.tangent("X")
    return {"Out": g.scale(t, op.attr("scale"))} if t is not None else {}


__all__ = ["exp_tangent", "reciprocal_tangent", "square_tangent", "pow_tangent", "sin_tangent", "cos_tangent",
           "abs_tangent", "softplus_tangent", "log_tangent", "sqrt_tangent", "sigmoid_tangent", "tanh_tangent",
           "relu_tangent", "leaky_relu_tangent", "clip_tangent", "gelu_tangent", "scale_tangent"]
