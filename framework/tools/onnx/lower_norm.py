"""Lowerings of the fused normalization gradients (layer norm's forward op is one ONNX node: its family module
maps it, ``OpSchema.onnx_mapping``).

The gradients become the few standard ops their formulas need (see ``grad_makers/normalization.py``):
with xhat = (X - mean) / sqrt(var + epsilon) and c = dY * Scale,
dX = (c - mean(c) - xhat * mean(c * xhat)) / sqrt(var + epsilon), dScale = sum(dY * xhat), dBias = sum(dY).
"""
from __future__ import annotations

from .context import Lowering
from .lower_math import RUN_TIME_SIZES, mean_node, reduce_node

__all__ = ["LOWERINGS", "OWN_EXPORTS"]


def _begin(ctx: Lowering) -> int:
    return ctx.attr("begin_norm_axis") % max(ctx.rank("X"), 1)


def _statistics(ctx: Lowering, x: str, axes: list[int]) -> tuple[str, str, str]:
    """Mean and biased variance of ``x`` over ``axes`` (kept as size-1 dims), and ``x`` centred."""
    dt = ctx.dtype("X")
    mean = mean_node(ctx, x, dt, axes, True)
    centred = ctx.g.node("Sub", [x, mean])
    return mean, mean_node(ctx, ctx.g.node("Mul", [centred, centred]), dt, axes, True), centred


def _summed(ctx: Lowering, v: str, axes: list[int], slot: str) -> None:
    """Bind output ``slot`` to ``v`` summed over ``axes`` (dropped); ``v`` itself when there are none."""
    if axes:
        ctx.set(reduce_node(ctx, "ReduceSum", v, axes, False, out=ctx.name(slot)), slot)
    else:
        ctx.finish(v, slot)


def _norm_grads(ctx: Lowering, centred: str, var: str, group: list[int], rest: list[int], scale: str | None,
                fixed: bool) -> None:
    """Bind X@GRAD, and Scale@GRAD and Bias@GRAD where the op has them, from X's centred values and variance."""
    g, dy, dt = ctx.g, ctx.x("Y@GRAD"), ctx.dtype("X")
    r = g.node("Reciprocal", [g.node("Sqrt", [g.node("Add", [var, ctx.scalar(ctx.attr("epsilon"), dt)])])])
    xhat = g.node("Mul", [centred, r])
    c = g.node("Mul", [dy, scale]) if scale else dy
    if fixed:
        ctx.emit("Mul", [c, r], slot="X@GRAD")
    else:
        mean = lambda v: mean_node(ctx, v, dt, group, True)  # noqa: E731
        inner = g.node("Sub", [g.node("Sub", [c, mean(c)]), g.node("Mul", [xhat, mean(g.node("Mul", [c, xhat]))])])
        ctx.emit("Mul", [inner, r], slot="X@GRAD")
    if ctx.op.output("Scale@GRAD"):
        _summed(ctx, g.node("Mul", [dy, xhat]), rest, "Scale@GRAD")
    if ctx.op.output("Bias@GRAD"):
        _summed(ctx, dy, rest, "Bias@GRAD")


def layer_norm_grad(ctx):
    rank, begin = ctx.rank("X"), _begin(ctx)
    group = list(range(begin, rank))
    _, var, centred = _statistics(ctx, ctx.x("X"), group)
    _norm_grads(ctx, centred, var, group, list(range(begin)), ctx.x("Scale") if ctx.has("Scale") else None, False)


def batch_norm_grad(ctx):
    g, x, rank = ctx.g, ctx.x("X"), ctx.rank("X")
    group = [0] + list(range(2, rank))
    channel = g.ints([1, -1] + [1] * (rank - 2))
    per_channel = lambda slot: g.node("Reshape", [ctx.x(slot), channel])  # noqa: E731
    if ctx.attr("is_test"):
        var, centred = per_channel("Variance"), g.node("Sub", [x, per_channel("Mean")])
    else:
        _, var, centred = _statistics(ctx, x, group)
    _norm_grads(ctx, centred, var, group, group, per_channel("Scale"), ctx.attr("is_test"))


LOWERINGS = {"layer_norm_grad": layer_norm_grad, "batch_norm_grad": batch_norm_grad}

OWN_EXPORTS = {"layer_norm_grad": RUN_TIME_SIZES,
               "batch_norm_grad": f"three outputs (the derived export takes one); {RUN_TIME_SIZES}"}
"""Ops with a formula (``OpSchema.compute``) exported here rather than from it (``lower_derived``), and why."""
