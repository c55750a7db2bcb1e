"""Gradients of the fused recurrent ops (lstm, gru) and of their gradient ops, so second order works.

With F the recurrence (inputs theta -> outputs), J its Jacobian and dF the output gradients:

    lstm -> lstm_grad(theta, dF) = J^T dF                          (backpropagation through time)
    lstm_grad, cotangent a on its outputs -> in theta: H_dF a,  in dF: J a
    lstm_jvp(theta, t, dF, s) = (J t,  H_dF t + J^T s)             (H_dF: the Hessian of <dF, F>)

lstm_grad's gradient is one lstm_jvp (its tangents in the direction a, H_dF being symmetric). lstm_jvp's own
gradient is again lstm_jvp ops as long as it needs no third derivative of F: cotangents u on J t and v on the
second output give t: J^T u + H_dF v, s: J v, theta: H_u t + H_s v, dF: none; the term left out,
``D^3F[dF, t, v]`` (in theta) and ``D^2F[t, v]`` (in dF), is third order, refused with a RuleError.
"""
from __future__ import annotations

from gradgen.program.ops.recurrent import OUTPUTS, PARAMS, grad_slot, tangent_slot

from .base import grad_maker
from .builder import RuleError, total

CELLS = tuple(PARAMS)


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


@grad_maker(*CELLS, emits=tuple(f"{c}_grad" for c in CELLS))
def recurrent_grad(g, op):
    """J^T dF in one fused op."""
    cell, given = op.type, given_params(op, op.type)
    ins = {**primal_inputs(op, cell), **{grad_slot(o): op.grad(o) for o in OUTPUTS[cell] if op.has_grad(o)}}
    outs = g.op(f"{cell}_grad", ins, op.attrs, outputs={grad_slot(p): 1 for p in given})
    return {p: outs[grad_slot(p)][0] for p in given}


@grad_maker(*(f"{c}_grad" for c in CELLS), emits=tuple(f"{c}_jvp" for c in CELLS))
def recurrent_grad_grad(g, op):
    """In theta H_dF a, in dF J a: the tangents of the forward and its gradient in the direction a."""
    cell = op.type.removesuffix("_grad")
    a = _cotangents(op, given_params(op, cell), grad_slot)
    cot = _present(op, OUTPUTS[cell], grad_slot)
    res = jvp(g, op, cell, a, cot, {}, list(cot), given_params(op, cell))
    return {**{p: res[grad_slot(p)] for p in given_params(op, cell)}, **{grad_slot(o): res[o] for o in cot}}


@grad_maker(*(f"{c}_jvp" for c in CELLS), emits=(*(f"{c}_jvp" for c in CELLS), "elementwise_add"))
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


__all__ = ["CELLS", "primal_inputs", "given_params", "jvp", "recurrent_grad", "recurrent_grad_grad", "recurrent_jvp_grad"]
