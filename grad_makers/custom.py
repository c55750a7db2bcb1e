"""Gradients of ``call`` (its block differentiated as a unit) and ``custom_gradient`` (the user's gradient body,
run by a ``call``). Both emit ``call`` ops, whose own gradient is ``call_grad`` again: second order works
wherever the bodies are differentiable."""
from __future__ import annotations

from gradgen.program.dtypes import is_float

from .base import grad_maker
from .control_flow import _picked, _spread


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


__all__ = ["call_grad", "custom_gradient_grad"]
