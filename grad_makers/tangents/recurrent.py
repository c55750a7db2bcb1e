"""Tangents of the fused recurrent ops, their gradient ops and their jvp ops, all as ``<cell>_jvp`` ops.

lstm's tangent is J t; lstm_grad's is H_dF t + J^T s (t, s the tangents of its inputs and of dF). lstm_jvp's
tangent is again lstm_jvp ops when only its linear inputs move (the tangents t, s and dF): J t' and
H_dF t' + H_dF' t + J^T s'; when theta itself moves it needs third derivatives, refused with a RuleError.
"""
from __future__ import annotations

from gradgen.program.ops.recurrent import OUTPUTS, PARAMS, grad_slot, tangent_slot

from ..builder import RuleError
from ..recurrent import CELLS, given_params, jvp
from ..tangent_rules import tangent_rule, total

_JVPS = tuple(f"{c}_jvp" for c in CELLS)


def _tangents(op, slots, name=lambda s: s) -> dict:
    return {s: t for s in slots if op.inputs(name(s)) and (t := op.tangent(name(s))) is not None}


@tangent_rule(*CELLS, emits=_JVPS)
def recurrent_tangent(g, op):
    """J t."""
    t = _tangents(op, PARAMS[op.type])
    if not t:
        return {}
    return jvp(g, op, op.type, t, {}, {}, list(OUTPUTS[op.type]), [])


@tangent_rule(*(f"{c}_grad" for c in CELLS), emits=_JVPS)
def recurrent_grad_tangent(g, op):
    """H_dF t + J^T s."""
    cell = op.type.removesuffix("_grad")
    params, outs = given_params(op, cell), OUTPUTS[cell]
    t, s = _tangents(op, params), _tangents(op, outs, grad_slot)
    if not t and not s:
        return {}
    df = {o: op.input(grad_slot(o)) for o in outs if op.inputs(grad_slot(o))}
    res = jvp(g, op, cell, t, df, s, [], params)
    return {grad_slot(p): res[grad_slot(p)] for p in params}


@tangent_rule(*_JVPS, emits=(*_JVPS, "elementwise_add"))
def recurrent_jvp_tangent(g, op):
    """J t' and H_dF t' + H_dF' t + J^T s' (t', dF', s' the tangents of the inputs t, dF, s)."""
    cell = op.type.removesuffix("_jvp")
    params, outs = given_params(op, cell), OUTPUTS[cell]
    if _tangents(op, params):
        raise RuleError(f"forward mode through {op.type} in its primal inputs needs third derivatives of the "
                        f"{cell} recurrence, which gradgen does not build")
    t2, df2, s2 = (_tangents(op, params, tangent_slot), _tangents(op, outs, grad_slot),
                   _tangents(op, outs, lambda o: tangent_slot(grad_slot(o))))
    if not (t2 or df2 or s2):
        return {}
    t = {p: op.input(tangent_slot(p)) for p in params if op.inputs(tangent_slot(p))}
    df = {o: op.input(grad_slot(o)) for o in outs if op.inputs(grad_slot(o))}
    want_out = [o for o in outs if op.outputs(tangent_slot(o))]
    want_grad = [p for p in params if op.outputs(tangent_slot(grad_slot(p)))]
    first = jvp(g, op, cell, t2, df, s2, want_out, want_grad)
    second = jvp(g, op, cell, t, df2, {}, [], want_grad) if df2 and t else {}
    out = {tangent_slot(o): first[o] for o in want_out}
    out.update({tangent_slot(grad_slot(p)): total(g, [first[grad_slot(p)], second.get(grad_slot(p))])
                for p in want_grad})
    return out


__all__ = ["recurrent_tangent", "recurrent_grad_tangent", "recurrent_jvp_tangent"]
