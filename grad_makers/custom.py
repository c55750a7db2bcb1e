"""Gradients and tangents of ``call`` (its block differentiated as a unit) and ``custom_gradient`` (the user's
gradient body, run by a ``call``). Both emit ``call`` ops, whose own gradient is ``call_grad`` again: second
order works wherever the bodies are differentiable.

- ``call``'s tangent: a ``call`` of a copy of the block with forward mode run
  inside, the inputs' tangents bound to new parameters.
- ``custom_gradient``'s tangent: the user gave the vector-Jacobian product
  ``dx = G(x, out, dout)``, linear in ``dout``. Its transpose in ``dout``,
  applied to the inputs' tangents, is the Jacobian-vector product that
  rule implies: ``dout_k = d/d dout_k sum_j <G_j(x, out, dout), dx_j>``
  (``op.transposed_block`` builds that backward pass over a copy of the
  gradient body). So both modes follow the user's rule, not the forward
  body's derivative, and agree with each other exactly.
"""
from __future__ import annotations

from gradgen.program.dtypes import is_float

from .base import grad_maker
from .control_flow import _picked, _spread
from .tangent_rules import tangent_rule, zeros_for_missing


@grad_maker("call", emits=("call",))
def call_grad(g, op):
    """A ``call`` of a copy of the block with a backward pass run inside, seeded with the outputs' gradients."""
    xs, params, inputs = op.inputs("X"), op.attr("params"), op.inputs("Input")
    x_wanted, in_wanted = op.wanted("X"), op.wanted("Input")
    wrt = _picked(list(params), x_wanted) + _picked(inputs, in_wanted)
    if not wrt:
        return {}
    seeds = [d if is_float(op.dtype(o)) else None for o, d in zip(op.outputs("Out"), op.grads_or_none("Out"))]
    block = g.sub_block()
    block.copy_vars(op.attr("block"))
    block.copy_ops(op.attr("block"))
    block.returns(block.differentiate(op.attr("outs"), seeds, wrt))
    grads = g.op("call", {"X": xs, "Input": g.reads(block)},
                 {"block": block, "params": list(params), "outs": block.results}, outputs={"Out": len(wrt)})["Out"]
    n = sum(x_wanted)
    found = {"X": _spread(grads[:n], x_wanted)}
    if inputs:
        found["Input"] = _spread(grads[n:], in_wanted)
    return found


@tangent_rule("call", emits=("call", "fill_zeros_like"))
def call_tangent(g, op):
    xs, x_tangents, params = op.inputs("X"), op.tangents("X"), op.attr("params")
    seeds = [(n, t) for n, t in zip(op.inputs("Input"), op.tangents("Input")) if t is not None]
    moving = [is_float(op.dtype(x)) for x in xs]
    floats = [is_float(op.dtype(o)) for o in op.outputs("Out")]
    if not any(floats) or (not seeds and all(t is None for t in _picked(x_tangents, moving))):
        return {}
    idx, extra, tangents = op.tangent_block(op.attr("block"), _picked(op.attr("outs"), floats), seeds,
                                            carried=_picked(params, moving))
    bound = list(xs) + zeros_for_missing(g, _picked(xs, moving), _picked(x_tangents, moving))
    made = g.op("call", {"X": bound, "Input": op.reads([idx])},
                {"block": idx, "params": list(params) + extra, "outs": tangents}, outputs={"Out": sum(floats)})["Out"]
    return {"Out": _spread(made, floats)}


@grad_maker("custom_gradient", emits=("call",))
def custom_gradient_grad(g, op):
    """The user's gradient body, bound to the inputs, the outputs and the outputs' gradients."""
    xs, grad_outs = op.inputs("X"), op.attr("grad_outs")
    given = [k for k, name in enumerate(grad_outs) if name]
    if not given:
        return {}
    bound = list(xs) + op.outputs("Out") + op.grads("Out")
    made = g.op("call", {"X": bound, "Input": op.inputs("Input")},
                {"block": op.attr("grad_block"), "params": list(op.attr("grad_params")),
                 "outs": [grad_outs[k] for k in given]}, outputs={"Out": len(given)})["Out"]
    grads = [None] * len(xs)
    for k, grad in zip(given, made):
        grads[k] = grad
    return {"X": grads}


@tangent_rule("custom_gradient", emits=("call", "fill_zeros_like"))
def custom_gradient_tangent(g, op):
    xs, x_tangents, outs = op.inputs("X"), op.tangents("X"), op.outputs("Out")
    if all(t is None for t in x_tangents):
        return {}
    params = list(op.attr("grad_params"))  # the inputs', the outputs' and the output gradients' parameters
    floats = [is_float(op.dtype(o)) for o in outs]
    idx, tangents = op.transposed_block(op.attr("grad_block"), op.attr("grad_outs"), x_tangents,
                                        _picked(params[len(xs) + len(outs):], floats))
    bound = list(xs) + list(outs) + [g.fill_zeros_like(o) for o in outs]  # the map is linear: any dout will do
    made = g.op("call", {"X": bound, "Input": op.reads([idx])},
                {"block": idx, "params": params, "outs": tangents}, outputs={"Out": sum(floats)})["Out"]
    return {"Out": _spread(made, floats)}


__all__ = ["call_grad", "call_tangent", "custom_gradient_grad", "custom_gradient_tangent"]
