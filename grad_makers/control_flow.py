"""Gradients and tangents of ``cond`` and ``while``: control-flow ops whose gradient sub-blocks are recorded,
not built.

Both makers describe their gradient sub-blocks with ``g.sub_block()`` (see
``builder.SubBlock``): the ops to copy from a forward block (a recompute),
extra ops, and a ``differentiate`` step. The backward pass builds the blocks,
running itself inside each one for that step. Both makers emit ordinary
control-flow ops, so a gradient of a gradient goes through the same makers
again (second order through loops and branches).

- ``cond``'s gradient is a ``cond`` on the same predicate. Each branch's
  gradient block re-runs the branch's forward ops, then its backward ops,
  seeded with the gradients of the cond's outputs; an input a branch does
  not use gets a zero gradient there.
- ``while``'s gradient is a ``while`` that walks the forward iterations in
  reverse. Its loop vars are a counter (``Steps`` down to 0), the gradient of
  every float loop var (the carry from one iteration to the previous one)
  and one accumulator per outer input that wants a gradient (parameters
  read by the body). Each reverse iteration reads the forward loop values of
  its iteration from ``History``, re-runs the body's forward ops, and runs
  the body's backward ops.

Their tangents are control-flow ops too, whose sub-blocks are copies of the
forward blocks with forward mode run inside (``op.tangent_block``, built by the
forward pass):

- ``cond``'s tangent is a ``cond`` on the same predicate: each branch re-runs its
  forward ops and pushes the tangents of the cond's inputs through them.
- ``while``'s tangent is a ``while`` that carries, beside every loop var, the
  tangent of each float loop var: its body re-runs one forward iteration and
  pushes the carried tangents (and those of the outer inputs it reads) through.
  The forward values it recomputes are its first outputs; the tangents follow,
  in ``Out`` and in ``History`` (the tangent of the record a backward loop reads).
"""
from __future__ import annotations

from gradgen.program.dtypes import is_float

from .base import grad_maker
from .builder import Builder, SubBlock
from .tangent_rules import tangent_rule, zeros_for_missing


def _picked(values: list, keep: list[bool]) -> list:
    return [v for v, k in zip(values, keep) if k]


def _spread(values: list, keep: list[bool]) -> list:
    """The inverse of ``_picked``: ``values`` at the kept positions, None elsewhere."""
    it = iter(values)
    return [next(it) if k else None for k in keep]


@grad_maker("cond", emits=("cond",))
def cond_grad(g, op):
    wanted = op.wanted("Input")
    inputs = _picked(op.inputs("Input"), wanted)
    if not inputs:
        return {}
    seeds = [d if is_float(op.dtype(o)) else None for o, d in zip(op.outputs("Out"), op.grads_or_none("Out"))]
    branches = []
    for key in ("true", "false"):
        block = g.sub_block()
        block.copy_vars(op.attr(f"{key}_block"))
        block.copy_ops(op.attr(f"{key}_block"))
        block.returns(block.differentiate(op.attr(f"{key}_outs"), seeds, inputs))
        branches.append(block)
    grads = g.op("cond", {"Cond": op.input("Cond"), "Input": g.reads(*branches)},
                 {"true_block": branches[0], "false_block": branches[1], "true_outs": branches[0].results,
                  "false_outs": branches[1].results}, outputs={"Out": len(inputs)})["Out"]
    return {"Input": _spread(grads, wanted)}


@tangent_rule("cond", emits=("cond",))
def cond_tangent(g, op):
    seeds = [(x, t) for x, t in zip(op.inputs("Input"), op.tangents("Input")) if t is not None]
    moving = [is_float(op.dtype(o)) for o in op.outputs("Out")]
    if not seeds or not any(moving):
        return {}
    branches = {}
    for key in ("true", "false"):
        branches[key] = op.tangent_block(op.attr(f"{key}_block"), _picked(op.attr(f"{key}_outs"), moving), seeds)
    (true_idx, _, true_outs), (false_idx, _, false_outs) = branches["true"], branches["false"]
    made = g.op("cond", {"Cond": op.input("Cond"), "Input": op.reads([true_idx, false_idx])},
                {"true_block": true_idx, "false_block": false_idx, "true_outs": true_outs, "false_outs": false_outs},
                outputs={"Out": sum(moving)})["Out"]
    return {"Out": _spread(made, moving)}


def _countdown(g: Builder, types: list) -> SubBlock:
    """The reverse loop's condition block: go on while the counter (the first loop var) is above 0."""
    block = g.sub_block()
    params = [block.param(t, f"cond{k}") for k, t in enumerate(types)]
    zero = block.fill_constant([], "int64", 0.0)
    block.returns([block.named("going", block.compare("greater_than", params[0], zero))])
    return block


def _reverse_body(g: Builder, op, types: list, carried: list[int], wanted: list[str]) -> SubBlock:
    """The reverse loop's body block: one forward iteration, read back from History and differentiated.

    Its loop vars are the counter, the carried gradients and the accumulators
    (in ``types`` order); its results are their next values.
    """
    body, body_params, body_outs = op.attr("body_block"), op.attr("body_params"), op.attr("body_outs")
    history_grads = op.grads_or_none("History")
    block = g.sub_block()
    params = [block.param(t, f"body{k}") for k, t in enumerate(types)]
    step, carries, accs = params[0], params[1:1 + len(carried)], params[1 + len(carried):]
    index = block.named("index", block.sub(step, block.fill_constant([], "int64", 1.0)))
    block.copy_vars(body)
    for record, param in zip(op.outputs("History"), body_params):  # this iteration's forward loop values
        block.gather(record, index, into=param)
    block.copy_ops(body)
    grads = block.differentiate([body_outs[k] for k in carried], carries, [body_params[k] for k in carried] + wanted)
    # The loop value at an iteration's start may be used outside too (by a second-order pass): add that gradient.
    new_carries = [grad if history_grads[k] is None else block.add(grad, block.gather(history_grads[k], index))
                   for k, grad in zip(carried, grads)]
    new_accs = [block.named("acc", block.add(acc, grad)) for acc, grad in zip(accs, grads[len(carried):])]
    block.returns([index] + new_carries + new_accs)
    return block


@grad_maker("while", emits=("while", "fill_zeros_like"))
def while_grad(g, op):
    xs, steps = op.inputs("X"), op.output("Steps")
    carried = [k for k, x in enumerate(xs) if is_float(op.dtype(x))]
    x_wanted, in_wanted = op.wanted("X"), op.wanted("Input")
    wanted = _picked(op.inputs("Input"), in_wanted)
    if not wanted and not any(x_wanted[k] for k in carried):
        return {}
    out_grads = op.grads_or_none("Out")
    # Loop vars of the reverse loop: the counter, each float loop var's gradient, each wanted input's sum.
    init = [steps] + [out_grads[k] or g.fill_zeros_like(xs[k]) for k in carried]
    init += [g.fill_zeros_like(n) for n in wanted]
    types = [op.var_type(n) for n in [steps] + [xs[k] for k in carried] + wanted]
    cond, body = _countdown(g, types), _reverse_body(g, op, types, carried, wanted)
    outs = g.op("while", {"X": init, "Input": g.reads(cond, body)},
                {"cond_block": cond, "body_block": body, "cond_params": [p for p, _ in cond.params],
                 "cond_out": cond.results[0], "body_params": [p for p, _ in body.params], "body_outs": body.results,
                 "max_iterations": op.attr("max_iterations")},
                outputs={"Out": len(init), "History": len(init), "Steps": 1})["Out"]
    x_grads = dict(zip(carried, outs[1:]))
    return {"X": [x_grads.get(k) for k in range(len(xs))], "Input": _spread(outs[1 + len(carried):], in_wanted)}


@tangent_rule("while", emits=("while", "fill_zeros_like"))
def while_tangent(g, op):
    xs, x_tangents = op.inputs("X"), op.tangents("X")
    seeds = [(n, t) for n, t in zip(op.inputs("Input"), op.tangents("Input")) if t is not None]
    carried = [is_float(op.dtype(x)) for x in xs]
    if not seeds and all(t is None for t in _picked(x_tangents, carried)):
        return {}
    cond_params, body_params, body_outs = op.attr("cond_params"), op.attr("body_params"), op.attr("body_outs")
    cond_idx, cond_extra, _ = op.tangent_block(op.attr("cond_block"), [], [], carried=_picked(cond_params, carried),
                                               keep=[op.attr("cond_out")])
    body_idx, body_extra, body_tangents = op.tangent_block(
        op.attr("body_block"), _picked(body_outs, carried), seeds, carried=_picked(body_params, carried),
        keep=body_outs)
    init = list(xs) + zeros_for_missing(g, _picked(xs, carried), _picked(x_tangents, carried))
    n = len(init)
    made = g.op("while", {"X": init, "Input": op.reads([cond_idx, body_idx])},
                {"cond_block": cond_idx, "body_block": body_idx, "cond_params": list(cond_params) + cond_extra,
                 "cond_out": op.attr("cond_out"), "body_params": list(body_params) + body_extra,
                 "body_outs": list(body_outs) + body_tangents, "max_iterations": op.attr("max_iterations")},
                outputs={"Out": n, "History": n, "Steps": 1})
    # The tangent loop's own records of the carried tangents are the tangents of the forward records
    # (a backward loop that reads History needs them: forward over reverse).
    return {"Out": _spread(made["Out"][len(xs):], carried), "History": _spread(made["History"][len(xs):], carried)}


__all__ = ["cond_grad", "cond_tangent", "while_grad", "while_tangent"]
