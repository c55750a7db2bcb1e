"""Lowerings of the learning-rate schedules (``program/ops/lr_schedule.py``, whose computes the engines run; the
step counter is exported from its compute: ``lower_derived``).

A schedule reads the integer step counter and computes the rate in float64, as its compute does, then rounds it
once to the op's dtype (``lower_math.rounded_once``): ``piecewise_decay`` counts the boundaries passed and
``Gather``s the value; the decays are ``Pow``/``Cos`` of the step; warmup is a ``Where``.
"""
from __future__ import annotations

import math

import numpy as np

from .context import Lowering
from .graph import onnx_dtype
from .lower_math import rounded_once

__all__ = ["LOWERINGS", "OWN_EXPORTS"]


def _step(ctx: Lowering) -> str:
    """The step counter as a float64 scalar."""
    return ctx.g.node("Cast", [ctx.to_scalar(ctx.x("Step"))], to=onnx_dtype("float64"))


def _as_dtype(ctx: Lowering, value: str, dtype: str) -> str:
    """float64 ``value`` rounded once to ``dtype`` (``lower_math.rounded_once``)."""
    return ctx.g.node("Cast", [rounded_once(ctx, value, dtype)], to=onnx_dtype(dtype))


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
    ctx.finish(_as_dtype(ctx, g.node("Mul", [s(ctx.attr("learning_rate"), "float64"), rate]), ctx.attr("dtype")))


def cosine_decay(ctx):
    g, s = ctx.g, ctx.scalar
    epoch = g.node("Floor", [g.node("Div", [_step(ctx), s(ctx.attr("step_each_epoch"), "float64")])])
    angle = g.node("Div", [g.node("Mul", [epoch, s(math.pi, "float64")]), s(ctx.attr("epochs"), "float64")])
    half = g.node("Mul", [s(ctx.attr("learning_rate") * 0.5, "float64"),
                          g.node("Add", [g.node("Cos", [angle]), s(1.0, "float64")])])
    ctx.finish(_as_dtype(ctx, half, ctx.attr("dtype")))


def linear_lr_warmup(ctx):
    g, s, dt = ctx.g, ctx.scalar, ctx.dtype("LearningRate")
    start, end, warmup = ctx.attr("start_lr"), ctx.attr("end_lr"), ctx.attr("warmup_steps")
    step = _step(ctx)
    ramp = g.node("Add", [s(start, "float64"), g.node("Div", [g.node("Mul", [s(end - start, "float64"), step]),
                                                              s(warmup, "float64")])])
    ramp = _as_dtype(ctx, ramp, dt)
    warming = g.node("Less", [step, s(warmup, "float64")])
    ctx.emit("Where", [warming, ramp, ctx.to_scalar(ctx.x("LearningRate"))])


LOWERINGS = {"piecewise_decay": piecewise_decay, "exponential_decay": exponential_decay,
             "cosine_decay": cosine_decay, "linear_lr_warmup": linear_lr_warmup}
"""gradgen op type -> lowering."""

OWN_EXPORTS = {t: "the step counter read as an int64 scalar (xp.reshape, xp.astype), which the ONNX xp does not "
                  "trace" for t in LOWERINGS}
"""Ops with a formula (``OpSchema.compute``) exported here rather than from it (``lower_derived``), and why."""
