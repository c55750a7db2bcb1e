"""Ops that run a sub-block as a function: ``call`` (a block as an op, so it can be differentiated as a unit)
and ``custom_gradient`` (a forward body with the user's own gradient body).

- ``call``: binds ``X`` to the block's ``params``, runs ``block`` and returns
  its ``outs`` as ``Out``. ``Input`` lists the outer vars the block reads.
- ``custom_gradient``: runs ``forward_block`` the same way; its gradient is
  ``grad_block`` (not the forward body's derivative), whose ``grad_params``
  are bound to ``X``, then ``Out``, then the gradients of ``Out``, and whose
  ``grad_outs`` are the gradients of ``X`` (an empty name: no gradient).
  ``rule`` names the rule in messages and reports.
"""
from __future__ import annotations

from ..dtypes import DTYPES
from ..schema import Attr, Slot, TensorType, schema
from ..shapes import dims_agree, format_shape


def _check_bound(ctx, params_attr: str, block_attr: str, values: list[TensorType], what: str) -> None:
    params = ctx.attr(params_attr)
    if len(params) != len(values):
        ctx.fail(f"{len(values)} {what} for {len(params)} block parameters")
    for k, (name, value) in enumerate(zip(params, values)):
        param = ctx.block_var(block_attr, name)
        if param.dtype != value.dtype or len(param.shape) != len(value.shape) or \
                not all(map(dims_agree, param.shape, value.shape)):
            ctx.fail(f"{what} {k} is {value.dtype}{format_shape(value.shape)} but block parameter '{name}' is "
                     f"{param.dtype}{format_shape(param.shape)}")


def _call(ctx):
    _check_bound(ctx, "params", "block", ctx.inputs("X"), "input")
    return {"Out": [ctx.block_var("block", n) for n in ctx.attr("outs")]}


def _custom_gradient(ctx):
    rule, xs = ctx.attr("rule"), ctx.inputs("X")
    _check_bound(ctx, "forward_params", "forward_block", xs, "input")
    outs = [ctx.block_var("forward_block", n) for n in ctx.attr("forward_outs")]
    grads = ctx.attr("grad_outs")
    if len(ctx.attr("grad_params")) != 2 * len(outs) + len(xs) or len(grads) != len(xs):
        ctx.fail(f"custom gradient '{rule}': the gradient body takes {len(ctx.attr('grad_params'))} vars and returns "
                 f"{len(grads)}, but the op has {len(xs)} inputs and {len(outs)} outputs")
    for k, (name, x) in enumerate(zip(grads, xs)):
        if not name:
            continue
        grad = ctx.block_var("grad_block", name)
        if grad.dtype != x.dtype or len(grad.shape) != len(x.shape) or not all(map(dims_agree, grad.shape, x.shape)):
            ctx.fail(f"custom gradient '{rule}': gradient {k} '{name}' is {grad.dtype}{format_shape(grad.shape)}, but "
                     f"input {k} is {x.dtype}{format_shape(x.shape)} (a gradient has its input's shape and dtype)")
    return {"Out": outs}


SCHEMAS = (
    schema("call", [Slot("X", duplicable=True, optional=True), Slot("Input", duplicable=True, optional=True)],
           [Slot("Out", duplicable=True)], _call,
           {"block": Attr("block"), "params": Attr("strs"), "outs": Attr("strs")},
           doc="Runs block with params bound to X; Out are its outs.", dtypes={"X": DTYPES, "Input": DTYPES}),
    schema("custom_gradient", [Slot("X", duplicable=True), Slot("Input", duplicable=True, optional=True)],
           [Slot("Out", duplicable=True)], _custom_gradient,
           {"rule": Attr("str"), "forward_block": Attr("block"), "forward_params": Attr("strs"),
            "forward_outs": Attr("strs"), "grad_block": Attr("block"), "grad_params": Attr("strs"),
            "grad_outs": Attr("strs")},
           doc="Runs forward_block on X; its gradient is the user's grad_block, not the body's derivative.",
           dtypes={"X": DTYPES, "Input": DTYPES}),
)

__all__ = ["SCHEMAS"]
