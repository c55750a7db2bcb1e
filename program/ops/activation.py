"""Unary elementwise ops (activations and friends) and their fused gradient ops."""
from __future__ import annotations

from ..schema import Attr, TensorType, same_as, schema


def _float_only(ctx):
    x = ctx.input("X")
    if not x.dtype.startswith("float"):
        ctx.fail(f"X must be a float tensor, got {x.dtype}")
    return {"Out": x}


def _grad_like(slot: str, out: str):
    def infer(ctx):
        a, g = ctx.input(slot), ctx.input("Out@GRAD")
        if a.dtype != g.dtype:
            ctx.fail(f"dtypes differ: {slot} is {a.dtype}, Out@GRAD is {g.dtype}")
        return {out: TensorType(a.shape, a.dtype)}

    return infer


UNARY_ATTRS = {
    "relu": {}, "sigmoid": {}, "tanh": {}, "exp": {}, "log": {}, "sqrt": {}, "square": {}, "abs": {},
    "sin": {}, "cos": {}, "gelu": {}, "softplus": {}, "reciprocal": {}, "sign": {},
    "leaky_relu": {"alpha": Attr("float", 0.01)},
    "scale": {"scale": Attr("float", 1.0), "bias": Attr("float", 0.0)},
    "clip": {"min": Attr("float", float("-inf")), "max": Attr("float", float("inf"))},
    "pow": {"factor": Attr("float", 1.0)},
    "erf": {}, "silu": {}, "elu": {"alpha": Attr("float", 1.0)},
}
"""Every unary op type and its attrs: Out = f(X), same shape and dtype."""

SCHEMAS = tuple(
    schema(t, ["X"], ["Out"], same_as("X") if t in ("scale", "abs", "sign") else _float_only, attrs)
    for t, attrs in UNARY_ATTRS.items()
) + (
    schema("relu_grad", ["Out", "Out@GRAD"], ["X@GRAD"], _grad_like("Out", "X@GRAD"),
           doc="X@GRAD = Out@GRAD where Out > 0, else 0: relu's gradient in one pass."),
    schema("tanh_grad", ["Out", "Out@GRAD"], ["X@GRAD"], _grad_like("Out", "X@GRAD"),
           doc="X@GRAD = Out@GRAD * (1 - Out^2): tanh's gradient from its output, in one op."),
    schema("sigmoid_grad", ["Out", "Out@GRAD"], ["X@GRAD"], _grad_like("Out", "X@GRAD"),
           doc="X@GRAD = Out@GRAD * Out * (1 - Out): sigmoid's gradient from its output, in one op."),
)


__all__ = ["UNARY_ATTRS", "SCHEMAS"]
