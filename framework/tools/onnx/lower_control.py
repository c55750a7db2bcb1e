"""Lowerings of ``cond`` to ONNX ``If``, of ``while`` to ONNX ``Loop``, and of the ops that run a body.

A sub-block becomes a subgraph that reads outer values by name, as ONNX allows. ``while``
checks its condition before every iteration and ``Loop`` after, so the condition block is lowered
twice: once before the loop (the loop's initial condition) and once at the end of the body, on
the new loop values. ``History`` becomes the loop's scan outputs (the loop values at the start of
each iteration, stacked) and ``Steps`` an extra loop-carried counter. ``max_iterations`` is not
exported: ONNX cannot raise an error mid-graph, and stopping early would return wrong values.
``call`` and ``custom_gradient`` (whose gradient rule is already in the program as a ``call``)
lower their body in place.
"""
from __future__ import annotations

import numpy as np

from .context import Lowering
from .graph import value_info

__all__ = ["LOWERINGS"]


def _typed(block, var_name: str, onnx_name: str):
    var = block.var(var_name)
    return value_info(onnx_name, var.dtype, var.shape)


def cond(ctx):
    program = ctx.op.block.program
    branches = {}
    for key in ("true", "false"):
        g, env = ctx.subgraph()
        block_idx = ctx.attr(f"{key}_block")
        ctx.lower_block(block_idx, g, env)
        block, infos = program.block(block_idx), []
        for r in ctx.attr(f"{key}_outs"):
            out = g.node("Identity", [env[r]], out=g.names.fresh(r))
            infos.append(_typed(block, r, out))
        branches[key] = g.graph(f"{key}_branch", [], infos)
    outs = [ctx.name("Out", k) for k in range(len(ctx.op.output("Out")))]
    ctx.g.node_multi("If", [ctx.to_scalar(ctx.x("Cond"))], outs, then_branch=branches["true"],
                     else_branch=branches["false"])
    for k, name in enumerate(outs):
        ctx.set(name, "Out", k)


def _condition(ctx: Lowering, g, env, values: list[str]) -> str:
    """Lower the cond block into ``g`` with its params bound to ``values``; the condition as a bool scalar."""
    env = env.new_child()
    env.update(zip(ctx.attr("cond_params"), values))
    ctx.lower_block(ctx.attr("cond_block"), g, env)
    return g.node("Reshape", [env[ctx.attr("cond_out")], g.ints([])])


def while_(ctx):
    xs, n = ctx.xs("X"), len(ctx.xs("X"))
    x_vars = [ctx.var("X", k) for k in range(n)]
    first = _condition(ctx, ctx.g, ctx.env, xs)

    body, env = ctx.subgraph()
    names = body.names
    it, c_in, steps_in = names.fresh("iteration"), names.fresh("cond_in"), names.fresh("steps_in")
    x_in = [names.fresh(f"{v.name}_in") for v in x_vars]
    env.update(zip(ctx.attr("body_params"), x_in))
    ctx.lower_block(ctx.attr("body_block"), body, env)
    new = [env[r] for r in ctx.attr("body_outs")]
    again = body.node("Identity", [_condition(ctx, body, env, new)])
    carried = [body.node("Identity", [v], out=names.fresh(f"{x.name}_next")) for v, x in zip(new, x_vars)]
    steps_out = body.node("Add", [steps_in, body.const(np.int64(1))])
    records = [body.node("Identity", [v], out=names.fresh(f"{x.name}_record")) for v, x in zip(x_in, x_vars)]
    graph = body.graph(
        "while_body",
        [value_info(it, "int64", []), value_info(c_in, "bool", []),
         *[value_info(name, x.dtype, x.shape) for name, x in zip(x_in, x_vars)], value_info(steps_in, "int64", [])],
        [value_info(again, "bool", []), *[value_info(name, x.dtype, x.shape) for name, x in zip(carried, x_vars)],
         value_info(steps_out, "int64", []),
         *[value_info(name, x.dtype, x.shape) for name, x in zip(records, x_vars)]])
    outs = [ctx.name("Out", k) for k in range(n)] + [ctx.name("Steps")] + [ctx.name("History", k) for k in range(n)]
    ctx.g.node_multi("Loop", ["", first, *xs, ctx.g.const(np.int64(0))], outs, body=graph)
    for k in range(n):
        ctx.set(outs[k], "Out", k)
        ctx.set(outs[n + 1 + k], "History", k)
    ctx.set(outs[n], "Steps")


def _inline(params_attr: str, block_attr: str, outs_attr: str):
    """``call`` and ``custom_gradient``: the (forward) body lowered in place, its params bound to X."""
    def lower(ctx):
        env = ctx.env.new_child()
        env.update(zip(ctx.attr(params_attr), ctx.xs("X") if ctx.has("X") else []))
        ctx.lower_block(ctx.attr(block_attr), ctx.g, env)
        for k, r in enumerate(ctx.attr(outs_attr)):
            ctx.finish(env[r], "Out", k)
    return lower


LOWERINGS = {"cond": cond, "while": while_, "call": _inline("params", "block", "outs"),
             "custom_gradient": _inline("forward_params", "forward_block", "forward_outs")}
"""gradgen op type -> lowering."""
