"""What each fusable op computes per element, as expression text for a generated loop body.

Plain data: ``EXPRESSIONS[op_type](op, read)`` returns ``{output slot: expression}``
where ``read(slot)`` is the expression of one element of that input and ``lit(x)``
(available in the generated module) a constant of the group's dtype. Each
expression does the same operations in the same order as the op's numpy kernel,
so fused and unfused results differ by rounding at most (fused code keeps
intermediates in registers; numpy stores them). NaN propagates as numpy's does:
``relu`` and ``max``/``min`` are written so that a NaN operand wins.

``REDUCTIONS`` are the ops that may end a group: a reduction over every axis,
accumulated in the loop (``reduce_sum``, ``reduce_mean``).
"""
from __future__ import annotations

from typing import Callable, Mapping

__all__ = ["EXPRESSIONS", "REDUCTIONS", "UPDATES", "full_reduction"]

Expression = Callable[..., Mapping[str, str]]


def _binary(symbol: str) -> Expression:
    return lambda op, read: {"Out": f"({read('X')} {symbol} {read('Y')})"}


def _unary(template: str) -> Expression:
    return lambda op, read: {"Out": template.format(x=read("X"))}


def _scale(op, read) -> Mapping[str, str]:
    s, b = float(op.attr("scale")), float(op.attr("bias"))
    y = f"({read('X')} * lit({s!r}))"
    return {"Out": y if b == 0.0 else f"({y} + lit({b!r}))"}


def _sgd(op, read) -> Mapping[str, str]:
    return {"ParamOut": f"({read('Param')} - {read('Grad')} * {read('LearningRate')})"}


def _momentum(op, read) -> Mapping[str, str]:
    mu = float(op.attr("mu"))
    v = f"({read('Velocity')} * lit({mu!r}) + {read('Grad')})"
    step = f"({read('Grad')} + {v} * lit({mu!r}))" if op.attr("use_nesterov") else v
    return {"VelocityOut": v, "ParamOut": f"({read('Param')} - {step} * {read('LearningRate')})"}


EXPRESSIONS: dict[str, Expression] = {
    "elementwise_add": _binary("+"),
    "elementwise_sub": _binary("-"),
    "elementwise_mul": _binary("*"),
    "elementwise_div": _binary("/"),
    "elementwise_max": lambda op, read: {"Out": "({x} if ({x} >= {y} or {x} != {x}) else {y})".format(
        x=read("X"), y=read("Y"))},
    "elementwise_min": lambda op, read: {"Out": "({x} if ({x} <= {y} or {x} != {x}) else {y})".format(
        x=read("X"), y=read("Y"))},
    "relu": _unary("({x} if not {x} <= 0 else lit(0.0))"),
    "tanh": _unary("math.tanh({x})"),
    "exp": _unary("math.exp({x})"),
    "square": _unary("({x} * {x})"),
    "abs": _unary("abs({x})"),
    "assign": _unary("{x}"),
    "scale": _scale,
    "relu_grad": lambda op, read: {"X@GRAD": f"({read('Out@GRAD')} * (lit(1.0) if {read('Out')} > 0 else lit(0.0)))"},
    "tanh_grad": lambda op, read: {
        "X@GRAD": f"((lit(1.0) - {read('Out')} * {read('Out')}) * {read('Out@GRAD')})"},
    "sigmoid_grad": lambda op, read: {
        "X@GRAD": f"(((lit(1.0) - {read('Out')}) * {read('Out')}) * {read('Out@GRAD')})"},
    "sgd": _sgd,
    "momentum": _momentum,
}
"""op type -> per-element expressions of its outputs."""

UPDATES = frozenset({"sgd", "momentum"})
"""Ops that update persistable vars in place: each is fused alone (one pass instead of two to four), so the
plan's double buffering and atomic commit apply to the fused step unchanged."""

REDUCTIONS = frozenset({"reduce_sum", "reduce_mean"})


def full_reduction(op, rank: int) -> bool:
    """True when ``op`` reduces its input over every axis (the form a loss takes)."""
    if op.type not in REDUCTIONS:
        return False
    dims = op.attr("dim")
    return bool(op.attr("reduce_all")) or not dims or {a % rank for a in dims} == set(range(rank))
