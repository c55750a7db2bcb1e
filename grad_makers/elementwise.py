"""Gradients and tangents of binary elementwise ops with broadcasting: each input's gradient is summed back to
its shape.

A rule gives an input's gradient at the output's shape; ``families.binary``
adds the ``reduce_as`` when the input was broadcast. A rule of None means the
gradient is ``dout`` itself (an ``assign``, which shares the array, when no
broadcast happened). The tangents follow the product rule, each term at the
output's shape.
"""
from __future__ import annotations

from .families import binary
from .tangent_rules import at_shape, tangent_rule, total


def _won(strict: str, loose: str):
    """max/min: the gradient goes to the input that won; at a tie each input gets half (as JAX and PyTorch do,
    and as ``reduce_max`` splits among ties), through the mask ((x wins strictly) + (x wins or ties)) / 2."""
    def rule(g, x, y, out, dout, op):
        dtype = op.dtype(x)
        won = g.add(g.cast(g.compare(strict, x, y), dtype), g.cast(g.compare(loose, x, y), dtype))
        return g.mul(dout, g.scale(won, 0.5))

    return rule


def _sides(op):
    return op.input("X"), op.input("Y"), op.output("Out"), op.tangent("X"), op.tangent("Y")


add_grad = binary("elementwise_add", emits=("assign", "reduce_as"), dx=None, dy=None)


@tangent_rule("elementwise_add", emits=("elementwise_add", "broadcast_to"))
def add_tangent(g, op):
    x, y, out, tx, ty = _sides(op)
    if tx is not None and ty is not None:
        return {"Out": g.add(tx, ty)}
    return {"Out": at_shape(g, op, tx, x, out) if tx is not None else at_shape(g, op, ty, y, out)}


sub_grad = binary("elementwise_sub", emits=("assign", "scale", "reduce_as"),
                  dx=None, dy=lambda g, x, y, out, dout: g.neg(dout))


@tangent_rule("elementwise_sub", emits=("elementwise_sub", "scale", "broadcast_to"))
def sub_tangent(g, op):
    x, y, out, tx, ty = _sides(op)
    if tx is not None and ty is not None:
        return {"Out": g.sub(tx, ty)}
    return {"Out": at_shape(g, op, tx, x, out) if tx is not None else g.neg(at_shape(g, op, ty, y, out))}


mul_grad = binary("elementwise_mul", emits=("elementwise_mul", "reduce_as"),
                  dx=lambda g, x, y, out, dout: g.mul(dout, y), dy=lambda g, x, y, out, dout: g.mul(dout, x))


@tangent_rule("elementwise_mul", emits=("elementwise_mul", "elementwise_add", "scale"))
def mul_tangent(g, op):
    x, y, out, tx, ty = _sides(op)
    if x == y and tx is not None:  # x * x: one product, doubled
        return {"Out": g.scale(g.mul(tx, x), 2.0)}
    return {"Out": total(g, [tx and g.mul(tx, y), ty and g.mul(x, ty)])}


div_grad = binary("elementwise_div", emits=("elementwise_div", "elementwise_mul", "scale", "reduce_as"),
                  dx=lambda g, x, y, out, dout: g.div(dout, y),
                  dy=lambda g, x, y, out, dout: g.neg(g.mul(g.div(dout, y), out)))


@tangent_rule("elementwise_div", emits=("elementwise_div", "elementwise_mul", "scale", "elementwise_add"))
def div_tangent(g, op):
    """d(x / y) = dx / y - out * dy / y."""
    x, y, out, tx, ty = _sides(op)
    return {"Out": total(g, [tx and g.div(tx, y), ty and g.neg(g.div(g.mul(ty, out), y))])}


def pow_dx(g, x, y, out, dout):
    """dout * y * x ** (y - 1), with x read as 1 where x and y are both 0 (the power is the constant 1 there, and
    y * 0 ** -1 would be 0 * inf).

    Only the base is replaced, never the whole slope: a mask on the slope would be constant in y, and the mixed
    second derivative d2/dxdy x ** y = x ** (y - 1) (1 + y log x) would lose its 1/x at y = 0."""
    ones = g.scale(g.fill_zeros_like(x), bias=1.0)
    x_or_one = g.where(g.compare("equal", x, g.fill_zeros_like(x)), ones, x)
    base = g.where(g.compare("equal", y, g.fill_zeros_like(y)), x_or_one, x)
    return g.mul(dout, g.mul(g.elementwise_pow(base, g.scale(y, bias=-1.0)), y))


def pow_dy(g, x, y, out, dout):
    """dout * x ** y * log(x), and 0 where x is 0 and y > 0 (x ** y is 0 on that side; log(0) is -inf).

    The log reads 1 where x is 0 (a second ``where``): the masked branch is still differentiated, and
    log(0)'s derivative 1/0 times the mask's 0 would make the second derivatives NaN there."""
    zeros = g.fill_zeros_like(x)
    at_zero = g.compare("equal", x, zeros)
    safe_x = g.where(at_zero, g.scale(zeros, bias=1.0), x)
    return g.mul(dout, g.where(at_zero, g.fill_zeros_like(out), g.mul(out, g.log(safe_x))))


pow_grad = binary("elementwise_pow", emits=("scale", "elementwise_pow", "elementwise_mul", "log", "reduce_as",
                                            "fill_zeros_like", "equal", "where"),
                  dx=pow_dx, dy=pow_dy)


@tangent_rule("elementwise_pow", emits=("scale", "elementwise_pow", "elementwise_mul", "log", "elementwise_add",
                                        "fill_zeros_like", "equal", "where"))
def pow_tangent(g, op):
    """d(x ** y) = dx * y * x ** (y - 1) + dy * out * log(x), with the reverse rule's values where x or y is 0."""
    x, y, out, tx, ty = _sides(op)
    return {"Out": total(g, [tx and pow_dx(g, x, y, out, tx), ty and pow_dy(g, x, y, out, ty)])}


def _winner(maker):
    """max/min: the reverse rule's per-input slope (1 where the input won, 1/2 at a tie, 0 where it lost) is
    diagonal, so its formula applied to each input's tangent in place of dout gives that input's term."""
    dx, dy = maker.rule

    def rule(g, op):
        x, y, out, tx, ty = _sides(op)
        return {"Out": total(g, [tx and dx(g, x, y, out, tx, op), ty and dy(g, x, y, out, ty, op)])}

    return tangent_rule(*maker.grad_of, emits=tuple(e for e in maker.emits if e != "reduce_as"))(rule)


_MASK = ("cast", "elementwise_add", "scale", "elementwise_mul", "reduce_as")
maximum_grad = binary("elementwise_max", emits=("greater_than", "greater_equal", "less_than", "less_equal") + _MASK,
                      dx=_won("greater_than", "greater_equal"), dy=_won("less_than", "less_equal"))
maximum_tangent = _winner(maximum_grad)
minimum_grad = binary("elementwise_min", emits=("less_than", "less_equal", "greater_than", "greater_equal") + _MASK,
                      dx=_won("less_than", "less_equal"), dy=_won("greater_than", "greater_equal"))
minimum_tangent = _winner(minimum_grad)


def mod_quotient(g, x, y, out):
    """The quotient of ``x mod y`` (floor or truncated, whichever the op took), as (x - out) / y: piecewise
    constant, and built from ``out`` so that its own derivatives are zero (d(x - out)/dx = 0, d((x - out)/y)/dy
    = q/y - q/y), which keeps the second derivatives exact."""
    return g.div(g.sub(x, out), y)


mod_grad = binary("elementwise_mod", emits=("elementwise_sub", "elementwise_div", "elementwise_mul", "scale",
                                            "assign", "reduce_as"),
                  dx=None, dy=lambda g, x, y, out, dout: g.neg(g.mul(dout, mod_quotient(g, x, y, out))))


@tangent_rule("elementwise_mod", emits=("elementwise_sub", "elementwise_div", "elementwise_mul", "scale",
                                        "elementwise_add", "broadcast_to"))
def mod_tangent(g, op):
    """d(x mod y) = dx - dy * q, q the piecewise constant quotient."""
    x, y, out, tx, ty = _sides(op)
    if ty is None:
        return {"Out": at_shape(g, op, tx, x, out)}
    return {"Out": total(g, [tx, g.neg(g.mul(ty, mod_quotient(g, x, y, out)))])}


__all__ = ["add_grad", "add_tangent", "sub_grad", "sub_tangent", "mul_grad", "mul_tangent", "div_grad", "div_tangent",
           "pow_grad", "pow_tangent", "maximum_grad", "maximum_tangent", "minimum_grad", "minimum_tangent", "mod_grad",
           "mod_tangent", "mod_quotient", "pow_dx", "pow_dy"]
