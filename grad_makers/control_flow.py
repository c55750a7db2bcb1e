"""Gradients of ``cond`` and ``while``: gradient sub-blocks, built by the backward pass run recursively.

Both makers emit ordinary control-flow ops, so a gradient of a gradient goes
through the same makers again (second order through loops and branches).

- ``cond``'s gradient is a ``cond`` on the same predicate. Each branch's
  gradient block re-runs the branch's forward ops (recompute), then its
  backward ops, seeded with the gradients of the cond's outputs; an input a
  branch does not use gets a zero gradient there.
- ``while``'s gradient is a ``while`` that walks the forward iterations in
  reverse. Its loop vars are a counter (``Steps`` down to 0), the gradient of
  every float loop var (the carry from one iteration to the previous one)
  and one accumulator per outer input that wants a gradient (parameters
  read by the body). Each reverse iteration reads the forward loop values of
  its iteration from ``History``, re-runs the body's forward ops, and runs
  the body's backward ops.
"""
from __future__ import annotations

from program.dtypes import is_float
from program.subblocks import copy_ops, copy_vars, external_reads, prune_unused

from .base import OpDesc, grad_maker, op


def _assign_targets(block, ctx, results: list[str], grads: list[str | None]) -> tuple[list[str], list[str]]:
    """The results that have gradients, as distinct vars made in ``block`` to seed the pass from.

    A result made by an op of the block is its own target; one that is a
    parameter, an outer var or a repeat gets an ``assign`` copy.
    """
    made = {n for op in block.ops for n in op.output_arg_names}
    targets, seeds = [], []
    for name, g in zip(results, grads):
        if g is None:
            continue
        target = name
        if name not in made or name in targets:
            target = ctx.tmp("target")
            block.append_op("assign", {"X": [name]}, {"Out": [target]}, role="backward")
        targets.append(target)
        seeds.append(g)
    return targets, seeds


def _or_zeros(block, ctx, grad: str | None, like: str) -> str:
    if grad is not None:
        return grad
    zeros = ctx.tmp("zeros")
    block.append_op("fill_zeros_like", {"X": [like]}, {"Out": [zeros]}, role="backward")
    return zeros


@grad_maker("cond", emits=("cond",))
def cond_grad(fwd, ctx) -> list[OpDesc]:
    wanted = [(n, g) for n, g in zip(ctx.input("Input"), ctx.input_grad("Input")) if g is not None]
    if not wanted:
        return []
    out_grads = [g if is_float(ctx.var_type(o).dtype) else None
                 for o, g in zip(ctx.output("Out"), ctx.output_grad_or_none("Out", declare=True))]
    program = fwd.block.program
    blocks, results = [], []
    for key in ("true", "false"):
        block = ctx.new_block()
        branch = program.block(fwd.attr(f"{key}_block"))
        copy_vars(branch, block)
        copy_ops(branch, block)
        targets, seeds = _assign_targets(block, ctx, fwd.attr(f"{key}_outs"), out_grads)
        inputs = [n for n, _ in wanted]
        grads = ctx.gradients(block, targets, seeds, inputs) if targets else [None] * len(inputs)
        results.append([_or_zeros(block, ctx, g, n) for g, (n, _) in zip(grads, wanted)])
        prune_unused(block, results[-1])
        blocks.append(block)
    return [op("cond", {"Cond": ctx.input("Cond")[0], "Input": external_reads(blocks)},
               {"Out": [g for _, g in wanted]}, true_block=blocks[0].idx, false_block=blocks[1].idx,
               true_outs=results[0], false_outs=results[1])]


@grad_maker("while", emits=("while", "fill_zeros_like"))
def while_grad(fwd, ctx) -> list[OpDesc]:
    xs, inputs = ctx.input("X"), ctx.input("Input")
    carried = [k for k, x in enumerate(xs) if is_float(ctx.var_type(x).dtype)]
    x_grads = ctx.input_grad("X")
    wanted = [(n, g) for n, g in zip(inputs, ctx.input_grad("Input")) if g is not None]
    if not wanted and all(x_grads[k] is None for k in carried):
        return []
    out_grads = ctx.output_grad_or_none("Out")
    history_grads = ctx.output_grad_or_none("History", declare=True)
    history, body = ctx.output("History"), fwd.block.program.block(fwd.attr("body_block"))
    descs: list[OpDesc] = []

    def zeros_like(name: str) -> str:
        zeros = ctx.tmp("zeros")
        descs.append(op("fill_zeros_like", {"X": name}, {"Out": zeros}))
        return zeros

    init = ([ctx.output("Steps")[0]] + [out_grads[k] or zeros_like(xs[k]) for k in carried]
            + [zeros_like(n) for n, _ in wanted])
    types = [ctx.var_type(n) for n in [ctx.output("Steps")[0]] + [xs[k] for k in carried] + [n for n, _ in wanted]]

    def params(block, role: str) -> list[str]:
        names = [ctx.tmp(f"{role}{k}") for k in range(len(types))]
        for name, t in zip(names, types):
            block.create_var(name, t.shape, t.dtype)
        return names

    cond_block = ctx.new_block()
    cond_params = params(cond_block, "cond")
    zero, going = ctx.tmp("zero"), ctx.tmp("going")
    cond_block.append_op("fill_constant", {}, {"Out": [zero]}, {"shape": [], "dtype": "int64", "value": 0.0},
                         role="backward")
    cond_block.append_op("greater_than", {"X": [cond_params[0]], "Y": [zero]}, {"Out": [going]}, role="backward")

    block = ctx.new_block()
    body_vars = params(block, "body")
    step, carries, accs = body_vars[0], body_vars[1:1 + len(carried)], body_vars[1 + len(carried):]
    one, index = ctx.tmp("one"), ctx.tmp("index")
    block.append_op("fill_constant", {}, {"Out": [one]}, {"shape": [], "dtype": "int64", "value": 1.0},
                    role="backward")
    block.append_op("elementwise_sub", {"X": [step], "Y": [one]}, {"Out": [index]}, role="backward")
    copy_vars(body, block)
    body_params = fwd.attr("body_params")
    for record, param in zip(history, body_params):  # this iteration's forward loop values
        block.append_op("gather", {"X": [record], "Index": [index]}, {"Out": [param]}, role="backward")
    copy_ops(body, block)
    body_outs = fwd.attr("body_outs")
    targets, seeds = _assign_targets(block, ctx, [body_outs[k] for k in carried], carries)
    grads = ctx.gradients(block, targets, seeds, [body_params[k] for k in carried] + [n for n, _ in wanted])
    new_carries = []
    for k, g in zip(carried, grads):
        g = _or_zeros(block, ctx, g, body_params[k])
        if history_grads[k] is not None:  # the loop value at this iteration's start is also used outside
            from_history, total = ctx.tmp("history"), ctx.tmp("carry")
            block.append_op("gather", {"X": [history_grads[k]], "Index": [index]}, {"Out": [from_history]},
                            role="backward")
            block.append_op("elementwise_add", {"X": [g], "Y": [from_history]}, {"Out": [total]}, role="backward")
            g = total
        new_carries.append(g)
    new_accs = []
    for acc, g in zip(accs, grads[len(carried):]):
        if g is None:
            new_accs.append(acc)
            continue
        total = ctx.tmp("acc")
        block.append_op("elementwise_add", {"X": [acc], "Y": [g]}, {"Out": [total]}, role="backward")
        new_accs.append(total)

    prune_unused(block, [index] + new_carries + new_accs, [step] + carries + accs)
    outs = ([ctx.tmp("step")] + [x_grads[k] or ctx.tmp("carry_out") for k in carried] + [g for _, g in wanted])
    return descs + [op("while", {"X": init, "Input": external_reads([cond_block, block])},
                       {"Out": outs, "History": [ctx.tmp("history") for _ in outs], "Steps": ctx.tmp("steps")},
                       cond_block=cond_block.idx, body_block=block.idx, cond_params=cond_params, cond_out=going,
                       body_params=[step] + carries + accs, body_outs=[index] + new_carries + new_accs,
                       max_iterations=fwd.attr("max_iterations"))]
