"""Lowerings of the collective ops for one process, used only with ``export_onnx(..., single_process=True)``.

No ONNX op talks to other processes, so a data-parallel program exports only as the graph of one
process alone, a world of one, where the collectives compute what their kernels compute for one rank:
``allreduce_start`` packs its inputs flat into the buffer (the sum over one rank is the buffer
itself), ``allreduce_wait`` cuts each gradient back out (the average divides by 1), and
``broadcast`` gives the process its own values.
"""
from __future__ import annotations

import numpy as np

__all__ = ["SINGLE_PROCESS"]


def allreduce_start(ctx):
    g = ctx.g
    ctx.emit("Concat", [g.node("Reshape", [x, g.ints([-1])]) for x in ctx.xs("X")], axis=0)


def allreduce_wait(ctx):
    g, flat = ctx.g, ctx.x("Buffer")
    start = 0
    for k in range(len(ctx.op.input("X"))):
        shape = list(ctx.var("X", k).shape)
        end = start + int(np.prod(shape, dtype=np.int64))
        piece = g.node("Slice", [flat, g.ints([start]), g.ints([end]), g.ints([0])])
        ctx.emit("Reshape", [piece, g.ints(shape)], "Out", k)
        start = end


def broadcast(ctx):
    for k in range(len(ctx.op.input("X"))):
        ctx.finish(ctx.x("X", k), "Out", k)


SINGLE_PROCESS = {"allreduce_start": allreduce_start, "allreduce_wait": allreduce_wait, "broadcast": broadcast}
"""collective op type -> its lowering for a world of one process."""
