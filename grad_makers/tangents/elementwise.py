"""Tangents of binary elementwise ops, matmul and einsum: the product rule, each term at the output's shape."""
from __future__ import annotations

from .. import elementwise as reverse
from ..tangent_rules import at_shape, tangent_rule, total


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


@tangent_rule("elementwise_pow", emits=("scale", "elementwise_pow", "elementwise_mul", "log", "elementwise_add",
                                        "fill_zeros_like", "equal", "where"))
def pow_tangent(g, op):
    """d(x ** y) = dx * y * x ** (y - 1) + dy * out * log(x), with the reverse rule's values where x or y is 0."""
    x, y, out, tx, ty = _sides(op)
    return {"Out": total(g, [tx and reverse.pow_dx(g, x, y, out, tx), ty and reverse.pow_dy(g, x, y, out, ty)])}


def _winner(maker):
    """max/min: the reverse rule's per-input slope (1 where the input won, 1/2 at a tie, 0 where it lost) is
    diagonal, so its formula applied to each input's tangent in place of dout gives that input's term."""
    dx, dy = maker.rule

    def rule(g, op):
        x, y, out, tx, ty = _sides(op)
        return {"Out": total(g, [tx and dx(g, x, y, out, tx, op), ty and dy(g, x, y, out, ty, op)])}

    return tangent_rule(*maker.grad_of, emits=tuple(e for e in maker.emits if e != "reduce_as"))(rule)


maximum_tangent = _winner(reverse.maximum_grad)
minimum_tangent = _winner(reverse.minimum_grad)


@tangent_rule("elementwise_mod", emits=("elementwise_sub", "elementwise_div", "elementwise_mul", "scale",
                                        "elementwise_add", "broadcast_to"))
def mod_tangent(g, op):
    """d(x mod y) = dx - dy * q, q the piecewise constant quotient."""
    x, y, out, tx, ty = _sides(op)
    if ty is None:
        return {"Out": at_shape(g, op, tx, x, out)}
    return {"Out": total(g, [tx, g.neg(g.mul(ty, reverse.mod_quotient(g, x, y, out)))])}


@tangent_rule("matmul", emits=("matmul", "elementwise_add"))
def matmul_tangent(g, op):
    """d(X @ Y) = dX @ Y + X @ dY, with the op's transposes."""
    x, y, out, tx, ty = _sides(op)
    tr = (op.attr("transpose_x"), op.attr("transpose_y"))
    return {"Out": total(g, [tx and g.matmul(tx, y, *tr), ty and g.matmul(x, ty, *tr)])}


@tangent_rule("einsum", emits=("einsum", "elementwise_add"))
def einsum_tangent(g, op):
    """The product rule: one einsum per moving operand, that operand replaced by its tangent, summed."""
    xs, ts = op.inputs("Operands"), op.tangents("Operands")
    return {"Out": total(g, [t and g.op("einsum", {"Operands": xs[:k] + [t] + xs[k + 1:]}, op.attrs)
                             for k, t in enumerate(ts)])}


__all__ = ["einsum_tangent", "add_tangent", "sub_tangent", "mul_tangent", "div_tangent", "pow_tangent",
           "maximum_tangent", "minimum_tangent", "mod_tangent", "matmul_tangent"]
