"""Gradients and tangents of the fused recurrent ops (lstm, gru) and of their gradient ops, so second order works.

With F the recurrence (inputs theta -> outputs), J its Jacobian and dF the output gradients:

    lstm -> lstm_grad(theta, dF) = J^T dF                          (backpropagation through time)
    lstm_grad, cotangent a on its outputs -> in theta: H_dF a,  in dF: J a
    lstm_jvp(theta, t, dF, s) = (J t,  H_dF t + J^T s)             (H_dF: the Hessian of <dF, F>)

lstm_grad's gradient is one lstm_jvp (its tangents in the direction a, H_dF being symmetric). lstm_jvp's own
gradient is again lstm_jvp ops as long as it needs no third derivative of F: cotangents u on J t and v on the
second output give t: J^T u + H_dF v, s: J v, theta: H_u t + H_s v, dF: none; the term left out,
``D^3F[dF, t, v]`` (in theta) and ``D^2F[t, v]`` (in dF), is third order, refused with a RuleError.

The tangents are ``<cell>_jvp`` ops as well: lstm's is J t; lstm_grad's is H_dF t + J^T s (t, s the tangents
of its inputs and of dF). lstm_jvp's tangent is again lstm_jvp ops when only its linear inputs move (the
tangents t, s and dF): J t' and H_dF t' + H_dF' t + J^T s'; when theta itself moves it needs third
derivatives, refused with a RuleError.
"""
from __future__ import annotations

from gradgen.program.ops.recurrent import OUTPUTS, PARAMS, grad_slot, tangent_slot

from .base import grad_maker
from .builder import RuleError, total
from .tangent_rules import tangent_rule

CELLS = tuple(PARAMS)
_JVPS = tuple(f"{c}_jvp" for c in CELLS)


def primal_inputs(op, cell: str) -> dict:
    """The op's inputs the forward recurrence reads (its params and SeqLens), by slot."""
    return {s: op.input(s) for s in (*PARAMS[cell], "SeqLens") if op.inputs(s)}


def given_params(op, cell: str) -> list[str]:
    return [p for p in PARAMS[cell] if op.inputs(p)]


def jvp(g, op, cell: str, tangents: dict, cotangents: dict, cotangent_tangents: dict, want_out: list[str],
        want_grad: list[str]) -> dict:
    """Record one ``<cell>_jvp``: the outputs' tangents ``want_out`` and the grad tangents of ``want_grad``."""
    ins = {**primal_inputs(op, cell), **{tangent_slot(p): v for p, v in tangents.items()},
           **{grad_slot(o): v for o, v in cotangents.items()},
           **{tangent_slot(grad_slot(o)): v for o, v in cotangent_tangents.items()}}
    outs = g.op(f"{cell}_jvp", ins, op.attrs, outputs={**{tangent_slot(o): 1 for o in want_out},
                                                        **{tangent_slot(grad_slot(p)): 1 for p in want_grad}})
    return {**{o: outs[tangent_slot(o)][0] for o in want_out},
            **{grad_slot(p): outs[tangent_slot(grad_slot(p))][0] for p in want_grad}}


def _present(op, slots, name=lambda s: s) -> dict:
    return {s: op.input(name(s)) for s in slots if op.inputs(name(s))}


def _cotangents(op, slots, name) -> dict:
    return {s: op.grad(name(s)) for s in slots if op.outputs(name(s)) and op.has_grad(name(s))}


def _tangents(op, slots, name=lambda s: s) -> dict:
    return {s: t for s in slots if op.inputs(name(s)) and (t := op.tangent(name(s))) is not None}


@grad_maker(*CELLS, emits=tuple(f"{c}_grad" for c in CELLS))
def recurrent_grad(g, op):
    """J^T dF in one fused op."""
    cell, given = op.type, given_params(op, op.type)
    ins = {**primal_inputs(op, cell), **{grad_slot(o): op.grad(o) for o in OUTPUTS[cell] if op.has_grad(o)}}
    outs = g.op(f"{cell}_grad", ins, op.attrs, outputs={grad_slot(p): 1 for p in given})
    return {p: outs[grad_slot(p)][0] for p in given}


@tangent_rule(*CELLS, emits=_JVPS)
def recurrent_tangent(g, op):
    """J t."""
    t = _tangents(op, PARAMS[op.type])
    if not t:
        return {}
    return jvp(g, op, op.type, t, {}, {}, list(OUTPUTS[op.type]), [])


@grad_maker(*(f"{c}_grad" for c in CELLS), emits=_JVPS)
def recurrent_grad_grad(g, op):
    """In theta H_dF a, in dF J a: the tangents of the forward and its gradient in the direction a."""
    cell = op.type.removesuffix("_grad")
    a = _cotangents(op, given_params(op, cell), grad_slot)
    cot = _present(op, OUTPUTS[cell], grad_slot)
    res = jvp(g, op, cell, a, cot, {}, list(cot), given_params(op, cell))
    return {**{p: res[grad_slot(p)] for p in given_params(op, cell)}, **{grad_slot(o): res[o] for o in cot}}


@tangent_rule(*(f"{c}_grad" for c in CELLS), emits=_JVPS)
def recurrent_grad_tangent(g, op):
    """H_dF t + J^T s."""
    cell = op.type.removesuffix("_grad")
    params, outs = given_params(op, cell), OUTPUTS[cell]
    t, s = _tangents(op, params), _tangents(op, outs, grad_slot)
    if not t and not s:
        return {}
    res = jvp(g, op, cell, t, _present(op, outs, grad_slot), s, [], params)
    return {grad_slot(p): res[grad_slot(p)] for p in params}


@grad_maker(*_JVPS, emits=(*_JVPS, "elementwise_add"))
def recurrent_jvp_grad(g, op):
    """t: J^T u + H_dF v; s: J v; theta: H_u t + H_s v (see the module docstring)."""
    cell = op.type.removesuffix("_jvp")
    params, outs = given_params(op, cell), OUTPUTS[cell]
    u, v = _cotangents(op, outs, tangent_slot), _cotangents(op, params, lambda p: tangent_slot(grad_slot(p)))
    t, df, s = _present(op, params, tangent_slot), _present(op, outs, grad_slot), _present(
        op, outs, lambda o: tangent_slot(grad_slot(o)))
    if v and t and df:
        raise RuleError(f"{op.type}: this gradient needs third derivatives of the {cell} recurrence "
                        "(a third-order gradient), which gradgen does not build")
    grads = {}
    if t or (s and v):
        res = jvp(g, op, cell, v, df, u, list(s) if v else [], list(t))
        grads.update({tangent_slot(p): res[grad_slot(p)] for p in t})
        grads.update({tangent_slot(grad_slot(o)): res[o] for o in s if v})
    hessians = [u and t and jvp(g, op, cell, t, u, {}, [], params), v and s and jvp(g, op, cell, v, s, {}, [], params)]
    grads.update({p: total(g, [h and h[grad_slot(p)] for h in hessians]) for p in params})
    return grads


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
    t, df = _present(op, params, tangent_slot), _present(op, outs, grad_slot)
    want_out = [o for o in outs if op.outputs(tangent_slot(o))]
    want_grad = [p for p in params if op.outputs(tangent_slot(grad_slot(p)))]
    first = jvp(g, op, cell, t2, df, s2, want_out, want_grad)
    second = jvp(g, op, cell, t, df2, {}, [], want_grad) if df2 and t else {}
    out = {tangent_slot(o): first[o] for o in want_out}
    out.update({tangent_slot(grad_slot(p)): total(g, [first[grad_slot(p)], second.get(grad_slot(p))])
                for p in want_grad})
    return out


__all__ = ["CELLS", "primal_inputs", "given_params", "jvp", "recurrent_grad", "recurrent_tangent",
           "recurrent_grad_grad", "recurrent_grad_tangent", "recurrent_jvp_grad", "recurrent_jvp_tangent"]
