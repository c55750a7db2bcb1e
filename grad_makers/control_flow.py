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

from gradgen.program.dtypes import is_float
from gradgen.program.subblocks import copy_ops, copy_vars, external_reads, prune_unused

from .base import OpDesc, grad_maker, op


def _emit(block, op_type: str, inputs: dict, outputs: dict, **attrs) -> None:
    """Append one op of a gradient sub-block (role ``backward``)."""
    block.append_op(op_type, inputs, outputs, attrs, role="backward")


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
            _emit(block, "assign", {"X": [name]}, {"Out": [target]})
        targets.append(target)
        seeds.append(g)
    return targets, seeds


def _name_origins(block, fwd, originals: dict) -> None:
    """Give every backward op of gradient sub-block ``block`` a forward op that stays in the program.

    Grad ops made for a copied forward op name the user's original op (the
    copy may be pruned); the maker's own plumbing (counters, history reads,
    accumulators, zero fills) names ``fwd``, the control-flow op it serves.
    """
    for made in block.ops:
        if made.forward_op is not None and id(made.forward_op) in originals:
            made.forward_op = originals[id(made.forward_op)]
        elif made.role == "backward" and made.forward_op is None:
            made.forward_op = fwd


def _or_zeros(block, ctx, grad: str | None, like: str) -> str:
    if grad is not None:
        return grad
    zeros = ctx.tmp("zeros")
    _emit(block, "fill_zeros_like", {"X": [like]}, {"Out": [zeros]})
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
        originals = copy_ops(branch, block)
        targets, seeds = _assign_targets(block, ctx, fwd.attr(f"{key}_outs"), out_grads)
        inputs = [n for n, _ in wanted]
        grads = ctx.gradients(block, targets, seeds, inputs) if targets else [None] * len(inputs)
        results.append([_or_zeros(block, ctx, g, n) for g, (n, _) in zip(grads, wanted)])
        _name_origins(block, fwd, originals)
        prune_unused(block, results[-1])
        blocks.append(block)
    return [op("cond", {"Cond": ctx.input("Cond")[0], "Input": external_reads(blocks)},
               {"Out": [g for _, g in wanted]}, true_block=blocks[0].idx, false_block=blocks[1].idx,
               true_outs=results[0], false_outs=results[1])]


def _loop_params(ctx, block, types: list, role: str) -> list[str]:
    names = [ctx.tmp(f"{role}{k}") for k in range(len(types))]
    for name, t in zip(names, types):
        block.create_var(name, t.shape, t.dtype)
    return names


def _countdown_cond(ctx, types: list) -> tuple:
    """The reverse loop's condition block: go on while the counter (the first loop var) is above 0."""
    block = ctx.new_block()
    params = _loop_params(ctx, block, types, "cond")
    zero, going = ctx.tmp("zero"), ctx.tmp("going")
    _emit(block, "fill_constant", {}, {"Out": [zero]}, shape=[], dtype="int64", value=0.0)
    _emit(block, "greater_than", {"X": [params[0]], "Y": [zero]}, {"Out": [going]})
    return block, params, going


def _reverse_body(fwd, ctx, types: list, carried: list[int], wanted: list[str], history_grads: list) -> tuple:
    """The reverse loop's body block: one forward iteration, read back from History and differentiated.

    Its loop vars are the counter, the carried gradients and the accumulators
    (in ``types`` order); returns the block, those params and the next values.
    """
    body, history = fwd.block.program.block(fwd.attr("body_block")), fwd.output("History")
    body_params, body_outs = fwd.attr("body_params"), fwd.attr("body_outs")
    block = ctx.new_block()
    params = _loop_params(ctx, block, types, "body")
    step, carries, accs = params[0], params[1:1 + len(carried)], params[1 + len(carried):]
    one, index = ctx.tmp("one"), ctx.tmp("index")
    _emit(block, "fill_constant", {}, {"Out": [one]}, shape=[], dtype="int64", value=1.0)
    _emit(block, "elementwise_sub", {"X": [step], "Y": [one]}, {"Out": [index]})
    copy_vars(body, block)
    for record, param in zip(history, body_params):  # this iteration's forward loop values
        _emit(block, "gather", {"X": [record], "Index": [index]}, {"Out": [param]})
    originals = copy_ops(body, block)
    targets, seeds = _assign_targets(block, ctx, [body_outs[k] for k in carried], carries)
    grads = ctx.gradients(block, targets, seeds, [body_params[k] for k in carried] + wanted)
    new_carries = []
    for k, g in zip(carried, grads):
        g = _or_zeros(block, ctx, g, body_params[k])
        if history_grads[k] is not None:  # the loop value at this iteration's start is also used outside
            from_history, total = ctx.tmp("history"), ctx.tmp("carry")
            _emit(block, "gather", {"X": [history_grads[k]], "Index": [index]}, {"Out": [from_history]})
            _emit(block, "elementwise_add", {"X": [g], "Y": [from_history]}, {"Out": [total]})
            g = total
        new_carries.append(g)
    new_accs = []
    for acc, g in zip(accs, grads[len(carried):]):
        if g is not None:
            total = ctx.tmp("acc")
            _emit(block, "elementwise_add", {"X": [acc], "Y": [g]}, {"Out": [total]})
            acc = total
        new_accs.append(acc)
    nexts = [index] + new_carries + new_accs
    _name_origins(block, fwd, originals)
    prune_unused(block, nexts, params)
    return block, params, nexts


@grad_maker("while", emits=("while", "fill_zeros_like"))
def while_grad(fwd, ctx) -> list[OpDesc]:
    xs, inputs, steps = ctx.input("X"), ctx.input("Input"), ctx.output("Steps")[0]
    carried = [k for k, x in enumerate(xs) if is_float(ctx.var_type(x).dtype)]
    x_grads = ctx.input_grad("X")
    wanted = [(n, g) for n, g in zip(inputs, ctx.input_grad("Input")) if g is not None]
    if not wanted and all(x_grads[k] is None for k in carried):
        return []
    out_grads = ctx.output_grad_or_none("Out")
    history_grads = ctx.output_grad_or_none("History", declare=True)
    descs: list[OpDesc] = []

    def zeros_like(name: str) -> str:
        zeros = ctx.tmp("zeros")
        descs.append(op("fill_zeros_like", {"X": name}, {"Out": zeros}))
        return zeros

    # Loop vars of the reverse loop: the counter, each float loop var's gradient, each wanted input's sum.
    init = [steps] + [out_grads[k] or zeros_like(xs[k]) for k in carried] + [zeros_like(n) for n, _ in wanted]
    types = [ctx.var_type(n) for n in [steps] + [xs[k] for k in carried] + [n for n, _ in wanted]]
    cond_block, cond_params, going = _countdown_cond(ctx, types)
    _name_origins(cond_block, fwd, {})
    body_block, body_params, body_outs = _reverse_body(fwd, ctx, types, carried, [n for n, _ in wanted],
                                                       history_grads)
    outs = [ctx.tmp("step")] + [x_grads[k] or ctx.tmp("carry_out") for k in carried] + [g for _, g in wanted]
    return descs + [op("while", {"X": init, "Input": external_reads([cond_block, body_block])},
                       {"Out": outs, "History": [ctx.tmp("history") for _ in outs], "Steps": ctx.tmp("steps")},
                       cond_block=cond_block.idx, body_block=body_block.idx, cond_params=cond_params,
                       cond_out=going, body_params=body_params, body_outs=body_outs,
                       max_iterations=fwd.attr("max_iterations"))]
