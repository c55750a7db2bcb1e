"""Lowerings of the learning-rate schedules (``program/ops/lr_schedule.py``; the step counter is exported
from its compute: ``lower_derived``).

A schedule reads the integer step counter and computes the rate in float64, as its kernel does in
Python floats, then casts it to the op's dtype: ``piecewise_decay`` counts the boundaries passed
and ``Gather``s the value; the decays are ``Pow``/``Cos`` of the step; warmup is a ``Where``.
"""
from __future__ import annotations

import math

import numpy as np

from .context import Lowering
from .graph import onnx_dtype

__all__ = ["LOWERINGS"]


def _step(ctx: Lowering) -> str:
    """The step counter as a float64 scalar."""
    return ctx.g.node("Cast", [ctx.to_scalar(ctx.x("Step"))], to=onnx_dtype("float64"))


def _as_dtype(ctx: Lowering, value: str, dtype: str) -> None:
    ctx.emit("Cast", [value], to=onnx_dtype(dtype))


def piecewise_decay(ctx):
    g, step = ctx.g, ctx.to_scalar(ctx.x("Step"))
    passed = g.node("ReduceSum", [g.node("Cast", [g.node("GreaterOrEqual", [
        step, g.const(np.asarray(ctx.attr("boundaries"), ctx.dtype("Step")))])], to=onnx_dtype("int64"))],
        keepdims=0)
    values = g.const(np.asarray(ctx.attr("values"), ctx.attr("dtype")))
    ctx.emit("Gather", [values, passed], axis=0)


def exponential_decay(ctx):
    g, s = ctx.g, ctx.scalar
    exponent = g.node("Div", [_step(ctx), s(ctx.attr("decay_steps"), "float64")])
    if ctx.attr("staircase"):
        exponent = g.node("Floor", [exponent])
    rate = g.node("Pow", [s(ctx.attr("decay_rate"), "float64"), exponent])
    _as_dtype(ctx, g.node("Mul", [s(ctx.attr("learning_rate"), "float64"), rate]), ctx.attr("dtype"))


def cosine_decay(ctx):
    g, s = ctx.g, ctx.scalar
    epoch = g.node("Floor", [g.node("Div", [_step(ctx), s(ctx.attr("step_each_epoch"), "float64")])])
    angle = g.node("Div", [g.node("Mul", [epoch, s(math.pi, "float64")]), s(ctx.attr("epochs"), "float64")])
    half = g.node("Mul", [s(ctx.attr("learning_rate") * 0.5, "float64"),
                          g.node("Add", [g.node("Cos", [angle]), s(1.0, "float64")])])
    _as_dtype(ctx, half, ctx.attr("dtype"))


def linear_lr_warmup(ctx):
    g, s, dt = ctx.g, ctx.scalar, ctx.dtype("LearningRate")
    start, end, warmup = ctx.attr("start_lr"), ctx.attr("end_lr"), ctx.attr("warmup_steps")
    step = _step(ctx)
    ramp = g.node("Add", [s(start, "float64"), g.node("Div", [g.node("Mul", [s(end - start, "float64"), step]),
                                                              s(warmup, "float64")])])
    ramp = g.node("Cast", [ramp], to=onnx_dtype(dt))
    warming = g.node("Less", [step, s(warmup, "float64")])
    ctx.emit("Where", [warming, ramp, ctx.to_scalar(ctx.x("LearningRate"))])


LOWERINGS = {"piecewise_decay": piecewise_decay, "exponential_decay": exponential_decay,
             "cosine_decay": cosine_decay, "linear_lr_warmup": linear_lr_warmup}
"""gradgen op type -> lowering."""
