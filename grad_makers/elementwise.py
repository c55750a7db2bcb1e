"""Gradients of binary elementwise ops with broadcasting: each input's gradient is summed back to its shape.

A rule gives an input's gradient at the output's shape; ``families.binary``
adds the ``reduce_as`` when the input was broadcast. A rule of None means the
gradient is ``dout`` itself (an ``assign``, which shares the array, when no
broadcast happened).
"""
from __future__ import annotations

from .families import binary


def _won(compare: str):
    """max/min: the gradient goes to the input that won (ties to X), through a 0/1 mask."""
    return lambda g, x, y, out, dout, op: g.mul(dout, g.cast(g.compare(compare, x, y), op.dtype(x)))


add_grad = binary("elementwise_add", emits=("assign", "reduce_as"), dx=None, dy=None)
sub_grad = binary("elementwise_sub", emits=("assign", "scale", "reduce_as"),
                  dx=None, dy=lambda g, x, y, out, dout: g.neg(dout))
mul_grad = binary("elementwise_mul", emits=("elementwise_mul", "reduce_as"),
                  dx=lambda g, x, y, out, dout: g.mul(dout, y), dy=lambda g, x, y, out, dout: g.mul(dout, x))
div_grad = binary("elementwise_div", emits=("elementwise_div", "elementwise_mul", "scale", "reduce_as"),
                  dx=lambda g, x, y, out, dout: g.div(dout, y),
                  dy=lambda g, x, y, out, dout: g.neg(g.mul(g.div(dout, y), out)))
pow_grad = binary("elementwise_pow", emits=("scale", "elementwise_pow", "elementwise_mul", "log", "reduce_as"),
                  dx=lambda g, x, y, out, dout: g.mul(dout, g.mul(g.elementwise_pow(x, g.scale(y, bias=-1.0)), y)),
                  dy=lambda g, x, y, out, dout: g.mul(dout, g.mul(out, g.log(x))))
maximum_grad = binary("elementwise_max", emits=("greater_equal", "less_than", "cast", "elementwise_mul", "reduce_as"),
                      dx=_won("greater_equal"), dy=_won("less_than"))
minimum_grad = binary("elementwise_min", emits=("less_equal", "greater_than", "cast", "elementwise_mul", "reduce_as"),
                      dx=_won("less_equal"), dy=_won("greater_than"))

__all__ = ["add_grad", "sub_grad", "mul_grad", "div_grad", "pow_grad", "maximum_grad", "minimum_grad"]
