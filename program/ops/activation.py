"""Unary elementwise ops (activations and friends) and their fused gradient ops."""
from __future__ import annotations

from ..dtypes import FLOAT_DTYPES, INT_DTYPES, NUMERIC_DTYPES, unrepresentable
from ..schema import Attr, TensorType, same_as, schema


def _scale(ctx):
    """On integers scale and bias must be whole numbers the dtype holds: the result is exact, never truncated."""
    x = ctx.input("X")
    if x.dtype in INT_DTYPES:
        for name in ("scale", "bias"):
            problem = unrepresentable(ctx.attr(name), x.dtype)
            if problem is not None:
                ctx.fail(f"{name} {problem}; X is {x.dtype} (cast X to a float dtype to scale by fractions)")
    return {"Out": x}


def _grad_like(slot: str, out: str):
    def infer(ctx):
        a = ctx.input(slot)
        return {out: TensorType(a.shape, a.dtype)}

    return infer


UNARY_ATTRS = {
    "relu": {}, "sigmoid": {}, "tanh": {}, "exp": {}, "log": {}, "sqrt": {}, "square": {}, "abs": {},
    "sin": {}, "cos": {}, "gelu": {}, "softplus": {}, "reciprocal": {}, "sign": {},
    "leaky_relu": {"alpha": Attr("float", 0.01)},
    "scale": {"scale": Attr("scalar", 1.0), "bias": Attr("scalar", 0.0)},
    "clip": {"min": Attr("float", float("-inf")), "max": Attr("float", float("inf"))},
    "pow": {"factor": Attr("float", 1.0)},
    "erf": {}, "silu": {}, "elu": {"alpha": Attr("float", 1.0)},
}
"""Every unary op type and its attrs: Out = f(X), same shape and dtype."""

EXACT_ON_INTS = ("scale", "abs", "sign", "square")
"""The unary ops that also take integers, computed exactly in X's dtype; the others take floats only."""

_FROM_OUTPUT = {"Out": FLOAT_DTYPES, "Out@GRAD": "Out"}

SCHEMAS = tuple(
    schema(t, ["X"], ["Out"], _scale if t == "scale" else same_as("X"), attrs,
           dtypes={"X": NUMERIC_DTYPES if t in EXACT_ON_INTS else FLOAT_DTYPES})
    for t, attrs in UNARY_ATTRS.items()
) + (
    schema("relu_grad", ["Out", "Out@GRAD"], ["X@GRAD"], _grad_like("Out", "X@GRAD"),
           doc="X@GRAD = Out@GRAD where Out > 0, else 0: relu's gradient in one pass.", dtypes=_FROM_OUTPUT),
    schema("tanh_grad", ["Out", "Out@GRAD"], ["X@GRAD"], _grad_like("Out", "X@GRAD"),
           doc="X@GRAD = Out@GRAD * (1 - Out^2): tanh's gradient from its output, in one op.", dtypes=_FROM_OUTPUT),
    schema("sigmoid_grad", ["Out", "Out@GRAD"], ["X@GRAD"], _grad_like("Out", "X@GRAD"),
           doc="X@GRAD = Out@GRAD * Out * (1 - Out): sigmoid's gradient from its output, in one op.",
           dtypes=_FROM_OUTPUT),
)


__all__ = ["UNARY_ATTRS", "EXACT_ON_INTS", "SCHEMAS"]
