"""Tangents of ``cond`` and ``while``: control-flow ops whose tangent sub-blocks are copies of the forward
blocks with forward mode run inside (``op.tangent_block``, built by the pass).

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

from ..tangent_rules import tangent_rule, zeros_for_missing


@tangent_rule("cond", emits=("cond",))
def cond_tangent(g, op):
    seeds = [(x, t) for x, t in zip(op.inputs("Input"), op.tangents("Input")) if t is not None]
    outs = op.outputs("Out")
    moving = [k for k, o in enumerate(outs) if is_float(op.dtype(o))]
    if not seeds or not moving:
        return {}
    branches = {}
    for key in ("true", "false"):
        results = [op.attr(f"{key}_outs")[k] for k in moving]
        branches[key] = op.tangent_block(op.attr(f"{key}_block"), results, seeds)
    (true_idx, _, true_outs), (false_idx, _, false_outs) = branches["true"], branches["false"]
    made = g.op("cond", {"Cond": op.input("Cond"), "Input": op.reads([true_idx, false_idx])},
                {"true_block": true_idx, "false_block": false_idx, "true_outs": true_outs, "false_outs": false_outs},
                outputs={"Out": len(moving)})["Out"]
    tangents = [None] * len(outs)
    for k, t in zip(moving, made):
        tangents[k] = t
    return {"Out": tangents}


@tangent_rule("while", emits=("while", "fill_zeros_like"))
def while_tangent(g, op):
    xs, x_tangents = op.inputs("X"), op.tangents("X")
    seeds = [(n, t) for n, t in zip(op.inputs("Input"), op.tangents("Input")) if t is not None]
    carried = [k for k, x in enumerate(xs) if is_float(op.dtype(x))]
    if not seeds and all(x_tangents[k] is None for k in carried):
        return {}
    cond_params, body_params, body_outs = op.attr("cond_params"), op.attr("body_params"), op.attr("body_outs")
    cond_idx, cond_extra, _ = op.tangent_block(op.attr("cond_block"), [], [], carried=[cond_params[k] for k in carried],
                                               keep=[op.attr("cond_out")])
    body_idx, body_extra, body_tangents = op.tangent_block(
        op.attr("body_block"), [body_outs[k] for k in carried], seeds, carried=[body_params[k] for k in carried],
        keep=body_outs)
    init = list(xs) + zeros_for_missing(g, [xs[k] for k in carried], [x_tangents[k] for k in carried])
    n = len(init)
    made = g.op("while", {"X": init, "Input": op.reads([cond_idx, body_idx])},
                {"cond_block": cond_idx, "body_block": body_idx, "cond_params": list(cond_params) + cond_extra,
                 "cond_out": op.attr("cond_out"), "body_params": list(body_params) + body_extra,
                 "body_outs": list(body_outs) + body_tangents, "max_iterations": op.attr("max_iterations")},
                outputs={"Out": n, "History": n, "Steps": 1})
    # The tangent loop's own records of the carried tangents are the tangents of the forward records
    # (a backward loop that reads History needs them: forward over reverse).
    out_tangents, history_tangents = [None] * len(xs), [None] * len(xs)
    for j, k in enumerate(carried):
        out_tangents[k] = made["Out"][len(xs) + j]
        history_tangents[k] = made["History"][len(xs) + j]
    return {"Out": out_tangents, "History": history_tangents}


__all__ = ["cond_tangent", "while_tangent"]
