"""Collective ops: the communication a data-parallel program does, as ordinary ops.

``allreduce_start`` packs a bucket of gradients into one flat buffer and
starts summing it across ranks without waiting; ``allreduce_wait`` waits for
that sum and writes each gradient back under its own name (in place in
meaning, as Paddle's ``c_allreduce_sum`` is), divided by the number of ranks
when ``average`` is set. ``broadcast`` gives every rank root's values. The
number of ranks is a run-time fact (the process's communicator), never an
attr, so one saved program runs on any number of processes.
"""
from __future__ import annotations

from ..dtypes import DTYPES, INT_DTYPES, NUMERIC_DTYPES
from ..schema import Attr, Slot, TensorType, schema


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _static_same_dtype(ctx, slot: str) -> list[TensorType]:
    xs = ctx.inputs(slot)
    if not xs:
        ctx.fail(f"{slot} must name at least one var")
    for t in xs:
        if -1 in t.shape:
            ctx.fail(f"every {slot} needs a fully known shape to have a place in a flat buffer, got {list(t.shape)}")
        if t.dtype != xs[0].dtype:
            ctx.fail(f"every {slot} must have one dtype, got {xs[0].dtype} and {t.dtype}")
    return xs


def _start(ctx):
    xs = _static_same_dtype(ctx, "X")
    return {"Out": TensorType((sum(_size(t.shape) for t in xs),), xs[0].dtype)}


def _wait(ctx):
    xs = _static_same_dtype(ctx, "X")
    flat = ctx.input("Buffer")
    total = sum(_size(t.shape) for t in xs)
    if flat.shape != (total,) or flat.dtype != xs[0].dtype:
        ctx.fail(f"Buffer must be {xs[0].dtype}[{total}] (every X, flat), got {flat.dtype}{list(flat.shape)}")
    if ctx.attr("average") and flat.dtype in INT_DTYPES:
        ctx.fail(f"an average of {flat.dtype} values is not an {flat.dtype}: pass average=False for a sum, or "
                 "reduce float values")
    return {"Out": list(xs)}


def _broadcast(ctx):
    if ctx.attr("root") < 0:
        ctx.fail(f"root must be a rank (>= 0), got {ctx.attr('root')}")
    return {"Out": list(ctx.inputs("X"))}


SCHEMAS = (
    schema("allreduce_start", [Slot("X", duplicable=True)], ["Out"], _start,
           doc="Start summing every X across ranks, packed flat into Out in slot order; Out holds the sum only "
               "after the allreduce_wait that reads it.", stateful=True,
           dtypes={"X": NUMERIC_DTYPES}),
    schema("allreduce_wait", ["Buffer", Slot("X", duplicable=True)], [Slot("Out", duplicable=True)], _wait,
           {"average": Attr("bool", True)},
           doc="Wait for the sum started into Buffer; Out[i] is X[i]'s slice of it in X[i]'s shape, divided by "
               "the number of ranks when average is set (float X only). Out names the same vars as X.", stateful=True,
           dtypes={"Buffer": NUMERIC_DTYPES, "X": "Buffer"}),
    schema("broadcast", [Slot("X", duplicable=True)], [Slot("Out", duplicable=True)], _broadcast,
           {"root": Attr("int", 0)},
           doc="Every rank's Out[i] becomes rank root's X[i]. Out names the same vars as X.", stateful=True,
           dtypes={"X": DTYPES}),
)

__all__ = ["SCHEMAS"]
