"""Gradients of binary elementwise ops with broadcasting: each input's gradient is summed back to its shape.

A rule gives an input's gradient at the output's shape; ``families.binary``
adds the ``reduce_as`` when the input was broadcast. A rule of None means the
gradient is ``dout`` itself (an ``assign``, which shares the array, when no
broadcast happened).
"""
from __future__ import annotations

from .families import binary


def _won(strict: str, loose: str):
    """max/min: the gradient goes to the input that won; at a tie each input gets half (as JAX and PyTorch do,
    and as ``reduce_max`` splits among ties), through the mask ((x wins strictly) + (x wins or ties)) / 2."""
    def rule(g, x, y, out, dout, op):
        dtype = op.dtype(x)
        won = g.add(g.cast(g.compare(strict, x, y), dtype), g.cast(g.compare(loose, x, y), dtype))
        return g.mul(dout, g.scale(won, 0.5))

    return rule


add_grad = binary("elementwise_add", emits=("assign", "reduce_as"), dx=None, dy=None)
sub_grad = binary("elementwise_sub", emits=("assign", "scale", "reduce_as"),
                  dx=None, dy=lambda g, x, y, out, dout: g.neg(dout))
mul_grad = binary("elementwise_mul", emits=("elementwise_mul", "reduce_as"),
                  dx=lambda g, x, y, out, dout: g.mul(dout, y), dy=lambda g, x, y, out, dout: g.mul(dout, x))
div_grad = binary("elementwise_div", emits=("elementwise_div", "elementwise_mul", "scale", "reduce_as"),
                  dx=lambda g, x, y, out, dout: g.div(dout, y),
                  dy=lambda g, x, y, out, dout: g.neg(g.mul(g.div(dout, y), out)))


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
_MASK = ("cast", "elementwise_add", "scale", "elementwise_mul", "reduce_as")
maximum_grad = binary("elementwise_max", emits=("greater_than", "greater_equal", "less_than", "less_equal") + _MASK,
                      dx=_won("greater_than", "greater_equal"), dy=_won("less_than", "less_equal"))
minimum_grad = binary("elementwise_min", emits=("less_than", "less_equal", "greater_than", "greater_equal") + _MASK,
                      dx=_won("less_than", "less_equal"), dy=_won("greater_than", "greater_equal"))



def mod_quotient(g, x, y, out):
    """The quotient of ``x mod y`` (floor or truncated, whichever the op took), as (x - out) / y: piecewise
    constant, and built from ``out`` so that its own derivatives are zero (d(x - out)/dx = 0, d((x - out)/y)/dy
    = q/y - q/y), which keeps the second derivatives exact."""
    return g.div(g.sub(x, out), y)


mod_grad = binary("elementwise_mod", emits=("elementwise_sub", "elementwise_div", "elementwise_mul", "scale",
                                            "assign", "reduce_as"),
                  dx=None, dy=lambda g, x, y, out, dout: g.neg(g.mul(dout, mod_quotient(g, x, y, out))))

__all__ = ["add_grad", "sub_grad", "mul_grad", "div_grad", "pow_grad", "maximum_grad", "minimum_grad", "mod_grad", "mod_quotient", "pow_dx",
           "pow_dy"]
