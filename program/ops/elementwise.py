"""Binary elementwise ops with numpy broadcasting."""
from __future__ import annotations

from ..schema import TensorType, schema
from ..shapes import broadcast_shapes


def _broadcast(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    if x.dtype != y.dtype:
        ctx.fail(f"dtypes differ: {x.dtype} vs {y.dtype} (cast one of them first)")
    return {"Out": TensorType(broadcast_shapes(x.shape, y.shape), x.dtype)}


ELEMENTWISE_TYPES = ("elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div",
                     "elementwise_pow", "elementwise_max", "elementwise_min")

SCHEMAS = tuple(
    schema(t, ["X", "Y"], ["Out"], _broadcast, doc=f"Out = {t[12:]}(X, Y), with numpy broadcasting.")
    for t in ELEMENTWISE_TYPES
)


__all__ = ["ELEMENTWISE_TYPES", "SCHEMAS"]
