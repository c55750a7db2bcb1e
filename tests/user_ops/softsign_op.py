"""A user-defined op, complete: softsign(x) = x / (1 + |x|), registered with one call (design_docs/own_gradients.md)."""
import numpy as np

from gradgen.framework import register_op


def denominator(g, x):
    """(1 + |x|)^2: softsign'(x) = 1 / (1 + |x|)^2."""
    return g.square(g.scale(g.op("abs", {"X": x}), 1.0, 1.0))


softsign = register_op(
    "softsign", inputs=["X"], outputs=["Out"],
    kernel=lambda x: x / (1.0 + np.abs(x)),
    grad=lambda g, op: {"X": g.div(op.grad("Out"), denominator(g, op.input("X")))},
    tangent=lambda g, op: {"Out": g.div(op.tangent("X"), denominator(g, op.input("X")))},
    emits=("abs", "scale", "square", "elementwise_div"),
    doc="x / (1 + |x|): a smooth sign")
