"""Matrix products."""
from __future__ import annotations

from ..dtypes import NUMERIC_DTYPES
from ..schema import Attr, TensorType, schema
from ..shapes import broadcast_shapes, dims_agree


def _matmul(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    if len(x.shape) < 2 or len(y.shape) < 2:
        ctx.fail(f"matmul needs inputs of rank >= 2, got ranks {len(x.shape)} and {len(y.shape)} "
                 "(reshape or unsqueeze a vector first)")
    m, k = x.shape[-2:][::-1] if ctx.attr("transpose_x") else x.shape[-2:]
    k2, n = y.shape[-2:][::-1] if ctx.attr("transpose_y") else y.shape[-2:]
    if not dims_agree(k, k2):
        ctx.fail(f"inner dimensions differ: {k} vs {k2}")
    batch = broadcast_shapes(x.shape[:-2], y.shape[:-2])
    return {"Out": TensorType(batch + (m, n), x.dtype)}


SCHEMAS = (
    schema("matmul", ["X", "Y"], ["Out"], _matmul,
           {"transpose_x": Attr("bool", False), "transpose_y": Attr("bool", False)},
           doc="Batched matrix product over the last two dims; batch dims broadcast.",
           dtypes={"X": NUMERIC_DTYPES, "Y": "X"}),
)


__all__ = ["SCHEMAS"]
