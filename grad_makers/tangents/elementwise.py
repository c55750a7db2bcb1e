"""Tangents of binary elementwise ops and matmul: the product rule, each term at the output's shape."""
from __future__ import annotations

from .base import at_shape, tangent_rule, total


def _sides(op):
    return op.input("X"), op.input("Y"), op.output("Out"), op.tangent("X"), op.tangent("Y")


@tangent_rule("elementwise_add", emits=("elementwise_add", "broadcast_to"))
def add_tangent(g, op):
    x, y, out, tx, ty = _sides(op)
    if tx is not None and ty is not None:
        return {"Out": g.add(tx, ty)}
    return {"Out": at_shape(g, op, tx, x, out) if tx is not None else at_shape(g, op, ty, y, out)}


@tangent_rule("elementwise_sub", emits=("elementwise_sub", "scale", "broadcast_to"))
def sub_tangent(g, op):
    x, y, out, tx, ty = _sides(op)
    if tx is not None and ty is not None:
        return {"Out": g.sub(tx, ty)}
    return {"Out": at_shape(g, op, tx, x, out) if tx is not None else g.neg(at_shape(g, op, ty, y, out))}


@tangent_rule("elementwise_mul", emits=("elementwise_mul", "elementwise_add", "scale"))
def mul_tangent(g, op):
    x, y, out, tx, ty = _sides(op)
    if x == y and tx is not None:  # x * x: one product, doubled
        return {"Out": g.scale(g.mul(tx, x), 2.0)}
    return {"Out": total(g, [tx and g.mul(tx, y), ty and g.mul(x, ty)])}


@tangent_rule("elementwise_div", emits=("elementwise_div", "elementwise_mul", "scale", "elementwise_add"))
def div_tangent(g, op):
    """d(x / y) = dx / y - out * dy / y."""
    x, y, out, tx, ty = _sides(op)
    return {"Out": total(g, [tx and g.div(tx, y), ty and g.neg(g.div(g.mul(ty, out), y))])}


@tangent_rule("elementwise_pow", emits=("scale", "elementwise_pow", "elementwise_mul", "log", "elementwise_add"))
def pow_tangent(g, op):
    """d(x ** y) = dx * y * x ** (y - 1) + dy * out * log(x)."""
    x, y, out, tx, ty = _sides(op)
    return {"Out": total(g, [tx and g.mul(tx, g.mul(g.elementwise_pow(x, g.scale(y, bias=-1.0)), y)),
                             ty and g.mul(ty, g.mul(out, g.log(x)))])}


def _winner(compare_x: str, compare_y: str):
    """max/min: the output moves with the input that won (ties to X), as the reverse rule sends the gradient."""

    def rule(g, op):
        x, y, out, tx, ty = _sides(op)
        dtype = op.dtype(out)
        return {"Out": total(g, [tx and g.mul(tx, g.cast(g.compare(compare_x, x, y), dtype)),
                                 ty and g.mul(ty, g.cast(g.compare(compare_y, x, y), dtype))])}

    return rule


maximum_tangent = tangent_rule("elementwise_max", emits=("greater_equal", "less_than", "cast", "elementwise_mul",
                                                         "elementwise_add"))(_winner("greater_equal", "less_than"))
minimum_tangent = tangent_rule("elementwise_min", emits=("less_equal", "greater_than", "cast", "elementwise_mul",
                                                         "elementwise_add"))(_winner("less_equal", "greater_than"))


@tangent_rule("matmul", emits=("matmul", "elementwise_add"))
def matmul_tangent(g, op):
    """d(X @ Y) = dX @ Y + X @ dY, with the op's transposes."""
    x, y, out, tx, ty = _sides(op)
    tr = (op.attr("transpose_x"), op.attr("transpose_y"))
    return {"Out": total(g, [tx and g.matmul(tx, y, *tr), ty and g.matmul(x, ty, *tr)])}


__all__ = ["add_tangent", "sub_tangent", "mul_tangent", "div_tangent", "pow_tangent", "maximum_tangent",
           "minimum_tangent", "matmul_tangent"]
