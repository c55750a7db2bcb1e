"""Ops that move, copy or regroup elements without arithmetic (plus n-ary sum)."""
from __future__ import annotations

from ..schema import Attr, Slot, TensorType, schema
from ..shapes import broadcast_shapes, shapes_agree


def _sum(ctx):
    xs = ctx.inputs("X")
    first = xs[0]
    for t in xs[1:]:
        if t.dtype != first.dtype or not shapes_agree(t.shape, first.shape):
            ctx.fail(f"every input must have the same shape and dtype: {first.dtype}{list(first.shape)} "
                     f"vs {t.dtype}{list(t.shape)}")
    shape = tuple(next((d for d in ds if d != -1), -1) for ds in zip(*(t.shape for t in xs)))
    return {"Out": TensorType(shape, first.dtype)}


def _reduce_as(ctx):
    x, target = ctx.input("X"), ctx.input("Target")
    if len(target.shape) > len(x.shape):
        ctx.fail(f"Target has rank {len(target.shape)}, more than X's {len(x.shape)}")
    broadcast_shapes(x.shape, target.shape)
    return {"Out": TensorType(target.shape, x.dtype)}


def _broadcast_to(ctx):
    x = ctx.input("X")
    shape = ctx.input("ShapeLike").shape if ctx.has_input("ShapeLike") else tuple(ctx.attr("shape"))
    if len(shape) < len(x.shape):
        ctx.fail(f"cannot broadcast rank {len(x.shape)} to rank {len(shape)}")
    out = broadcast_shapes(x.shape, shape)
    if not shapes_agree(out, shape):
        ctx.fail(f"cannot broadcast {list(x.shape)} to {list(shape)}")
    return {"Out": TensorType(tuple(shape), x.dtype)}


SCHEMAS = (
    schema("sum", [Slot("X", duplicable=True)], ["Out"], _sum, doc="Out = X[0] + X[1] + ... (same shapes)."),
    schema("reduce_as", ["X", "Target"], ["Out"], _reduce_as,
           doc="Sum X over the dims that broadcasting added to Target's run-time shape: the adjoint of broadcast."),
    schema("broadcast_to", ["X", Slot("ShapeLike", optional=True)], ["Out"], _broadcast_to, {"shape": Attr("ints", [])},
           doc="X broadcast to `shape`, or to ShapeLike's run-time shape when given."),
)
