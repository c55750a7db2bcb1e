"""Learning-rate schedules as ops: a step counter and the schedules that turn it into a learning rate.

A schedule is part of the program, so it is saved, printed and inspected
with it (fetch its output to see this step's learning rate). ``increment``
advances the persistable step counter once per run; each schedule op reads
the counter and writes a 0-d learning rate the optimizer's update ops read.
None of them is differentiable: no gradient flows into a learning rate.
"""
from __future__ import annotations

import math

from ..dtypes import FLOAT_DTYPES, INT_DTYPES, NUMERIC_DTYPES, unrepresentable
from ..schema import Attr, TensorType, same_as, schema
from .creation import rounded


def _step(ctx):
    step = ctx.input("Step")
    if step.shape not in ((), (1,)):
        ctx.fail(f"Step must be a scalar (the step counter), got {step.dtype}{list(step.shape)}")


def _scalar_of_attr_dtype(check=None):
    def infer(ctx):
        _step(ctx)
        if check is not None:
            check(ctx)
        return {"Out": TensorType((), ctx.attr("dtype"))}

    return infer


def _piecewise(ctx):
    boundaries, values = ctx.attr("boundaries"), ctx.attr("values")
    if len(values) != len(boundaries) + 1:
        ctx.fail(f"needs one more value than boundaries, got {len(values)} values for {len(boundaries)} boundaries")
    if any(b >= c for b, c in zip(boundaries, boundaries[1:])):
        ctx.fail(f"boundaries must increase, got {boundaries}")


def _positive(*names):
    def check(ctx):
        for name in names:
            if not ctx.attr(name) > 0:
                ctx.fail(f"{name} must be positive, got {ctx.attr(name)}")

    return check


def _warmup(ctx):
    _step(ctx)
    lr = ctx.input("LearningRate")
    if lr.shape not in ((), (1,)):
        ctx.fail(f"LearningRate must be a scalar, got {lr.dtype}{list(lr.shape)}")
    if not ctx.attr("warmup_steps") > 0:
        ctx.fail(f"warmup_steps must be positive, got {ctx.attr('warmup_steps')}")
    return {"Out": TensorType((), lr.dtype)}


def _increment(ctx):
    x = ctx.input("X")
    if x.shape not in ((), (1,)):
        ctx.fail(f"X must be a scalar counter, got shape {list(x.shape)}")
    problem = unrepresentable(ctx.attr("step"), x.dtype)
    if problem:
        ctx.fail(f"step {problem}: it could not advance the {x.dtype} counter X exactly")
    return same_as("X")(ctx)


def increment(xp, x, *, step: float):
    """X + step in X's dtype. An integer counter adds the whole int (through a float it would lose counts: float64
    drops them above 2**53), wrapping at its dtype's top as numpy's integers do."""
    return x + (step if xp.isdtype(x.dtype, "real floating") else int(step))


def _count(xp, step):
    """The step counter as an int64 scalar (a Python int's comparisons: no wrap against a boundary past int32)."""
    return xp.astype(xp.reshape(step, ()), xp.int64)


def _rate(xp, rate, dtype: str):
    """A rate computed in float64 (a Python float's arithmetic), rounded once to ``dtype``."""
    return rounded(xp, rate, getattr(xp, dtype))


def piecewise_decay(xp, step, *, boundaries: list[int], values: list[float], dtype: str):
    """values[i], i the number of boundaries <= Step (the boundaries increase: the last one passed decides)."""
    s, rate = _count(xp, step), xp.asarray(values[0], dtype=xp.float64)
    for boundary, value in zip(boundaries, values[1:]):
        rate = xp.where(s >= boundary, value, rate)
    return _rate(xp, rate, dtype)


def exponential_decay(xp, step, *, learning_rate: float, decay_steps: int, decay_rate: float, staircase: bool,
                      dtype: str):
    """learning_rate * decay_rate ** (Step / decay_steps), the exponent floored when ``staircase`` (C99's pow:
    inf where it overflows)."""
    exponent = xp.astype(_count(xp, step), xp.float64) / decay_steps
    return _rate(xp, learning_rate * xp.pow(decay_rate, xp.floor(exponent) if staircase else exponent), dtype)


def cosine_decay(xp, step, *, learning_rate: float, step_each_epoch: int, epochs: int, dtype: str):
    """learning_rate / 2 * (cos(pi * epoch / epochs) + 1), epoch = Step // step_each_epoch (floored)."""
    epoch = xp.astype(_count(xp, step) // step_each_epoch, xp.float64)
    return _rate(xp, learning_rate * 0.5 * (xp.cos(epoch * math.pi / epochs) + 1.0), dtype)


def linear_lr_warmup(xp, step, lr, *, warmup_steps: int, start_lr: float, end_lr: float):
    """start_lr + (end_lr - start_lr) * Step / warmup_steps (in float64, rounded once to LearningRate's dtype) while
    Step < warmup_steps, then LearningRate itself."""
    s = _count(xp, step)
    ramp = start_lr + (end_lr - start_lr) * xp.astype(s, xp.float64) / warmup_steps
    return xp.where(s < warmup_steps, rounded(xp, ramp, lr.dtype), xp.reshape(lr, ()))


DTYPE = {"dtype": Attr("dtype", "float32")}
SCHEDULE_DTYPES = {"Step": INT_DTYPES, "dtype": FLOAT_DTYPES}
"""A schedule reads an integer step counter and writes a float learning rate."""

SCHEMAS = (
    schema("increment", ["X"], ["Out"], _increment, {"step": Attr("float", 1.0)},
           doc="Out = X + step: advances a counter (in place when Out names X).",
           dtypes={"X": NUMERIC_DTYPES}, compute=increment),
    schema("piecewise_decay", ["Step"], ["Out"], _scalar_of_attr_dtype(_piecewise),
           {"boundaries": Attr("ints"), "values": Attr("floats"), **DTYPE},
           doc="values[i] where i counts the boundaries <= Step: values[0] before boundaries[0], and so on.",
           dtypes=SCHEDULE_DTYPES, compute=piecewise_decay),
    schema("exponential_decay", ["Step"], ["Out"], _scalar_of_attr_dtype(_positive("decay_steps")),
           {"learning_rate": Attr("float"), "decay_steps": Attr("int"), "decay_rate": Attr("float"),
            "staircase": Attr("bool", False), **DTYPE},
           doc="learning_rate * decay_rate ^ (Step / decay_steps), the exponent floored when staircase.",
           dtypes=SCHEDULE_DTYPES, compute=exponential_decay),
    schema("cosine_decay", ["Step"], ["Out"], _scalar_of_attr_dtype(_positive("step_each_epoch", "epochs")),
           {"learning_rate": Attr("float"), "step_each_epoch": Attr("int"), "epochs": Attr("int"), **DTYPE},
           doc="learning_rate * (cos(pi * epoch / epochs) + 1) / 2 with epoch = floor(Step / step_each_epoch), "
               "as Paddle's cosine_decay (it rises again after `epochs` epochs).", dtypes=SCHEDULE_DTYPES,
           compute=cosine_decay),
    schema("linear_lr_warmup", ["Step", "LearningRate"], ["Out"], _warmup,
           {"warmup_steps": Attr("int"), "start_lr": Attr("float"), "end_lr": Attr("float")},
           doc="start_lr + (end_lr - start_lr) * Step / warmup_steps while Step < warmup_steps, then LearningRate.",
           dtypes={"Step": INT_DTYPES, "LearningRate": FLOAT_DTYPES}, compute=linear_lr_warmup),
)

__all__ = ["DTYPE", "SCHEDULE_DTYPES", "SCHEMAS", "cosine_decay", "exponential_decay", "increment", "linear_lr_warmup",
           "piecewise_decay"]
