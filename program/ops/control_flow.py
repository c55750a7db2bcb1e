"""Control-flow ops: an op that owns sub-blocks and runs them zero, one or many times.

Both ops are functional: a sub-block reads the owning op's inputs (the vars it
names in ``Input``, and its own parameter vars) and hands back named result
vars; it never writes a var of an outer block. That keeps the dataflow of the
outer block complete in the owning op's slots, which is what the backward pass
and the executor's liveness analysis read.

- ``cond``: runs ``true_block`` or ``false_block`` by the value of ``Cond``;
  ``Out[k]`` is the branch's var ``true_outs[k]`` or ``false_outs[k]``.
- ``while``: carries ``X`` through ``body_block`` while ``cond_block``'s
  ``cond_out`` holds. Each iteration binds the carried values to the blocks'
  parameter vars (``cond_params``, ``body_params``) and takes ``body_outs`` as
  the next values. ``History[k]`` stacks the value of ``X[k]`` at the start of
  every iteration (the record the gradient reads); ``Steps`` counts iterations.
"""
from __future__ import annotations

from ..dtypes import DTYPES
from ..schema import Attr, Slot, TensorType, schema
from ..shapes import dims_agree, format_shape


def _merged(a: TensorType, b: TensorType) -> TensorType:
    """The type both branches' results fit: dims that differ only by being unknown become -1."""
    return TensorType(tuple(x if x == y else -1 for x, y in zip(a.shape, b.shape)), a.dtype)


def _cond(ctx):
    pred = ctx.input("Cond")
    if pred.dtype != "bool" or any(d > 1 for d in pred.shape):
        ctx.fail(f"Cond must be a bool scalar (one element), got {pred.dtype}{format_shape(pred.shape)}")
    true_outs, false_outs = ctx.attr("true_outs"), ctx.attr("false_outs")
    if len(true_outs) != len(false_outs):
        ctx.fail(f"the branches return {len(true_outs)} and {len(false_outs)} vars")
    outs = []
    for k, (t_name, f_name) in enumerate(zip(true_outs, false_outs)):
        t, f = ctx.block_var("true_block", t_name), ctx.block_var("false_block", f_name)
        if t.dtype != f.dtype or len(t.shape) != len(f.shape) or not all(map(dims_agree, t.shape, f.shape)):
            ctx.fail(f"result {k} differs between the branches: true branch '{t_name}' is "
                     f"{t.dtype}{format_shape(t.shape)}, false branch '{f_name}' is {f.dtype}{format_shape(f.shape)}")
        outs.append(_merged(t, f))
    return {"Out": outs}


def _while(ctx):
    xs = ctx.inputs("X")
    params, body_params, body_outs = ctx.attr("cond_params"), ctx.attr("body_params"), ctx.attr("body_outs")
    if not len(xs) == len(params) == len(body_params) == len(body_outs):
        ctx.fail(f"{len(xs)} loop vars but {len(params)} cond params, {len(body_params)} body params and "
                 f"{len(body_outs)} body results")
    pred = ctx.block_var("cond_block", ctx.attr("cond_out"))
    if pred.dtype != "bool" or any(d > 1 for d in pred.shape):
        ctx.fail(f"the loop condition must be a bool scalar (one element), got {pred.dtype}{format_shape(pred.shape)}")
    for k, x in enumerate(xs):
        out = ctx.block_var("body_block", body_outs[k])
        if out.dtype != x.dtype or len(out.shape) != len(x.shape) or not all(map(dims_agree, out.shape, x.shape)):
            ctx.fail(f"loop var {k} is {x.dtype}{format_shape(x.shape)} but the body returns "
                     f"'{body_outs[k]}' as {out.dtype}{format_shape(out.shape)} (loop vars keep shape and dtype)")
    if ctx.attr("max_iterations") is not None and ctx.attr("max_iterations") < 0:
        ctx.fail(f"max_iterations must be >= 0, got {ctx.attr('max_iterations')}")
    return {"Out": list(xs), "History": [TensorType((-1,) + tuple(x.shape), x.dtype) for x in xs],
            "Steps": TensorType((), "int64")}


SCHEMAS = (
    schema("cond", ["Cond", Slot("Input", duplicable=True, optional=True)],
           [Slot("Out", duplicable=True, optional=True)],
           _cond, {"true_block": Attr("block"), "false_block": Attr("block"), "true_outs": Attr("strs"),
                   "false_outs": Attr("strs")},
           doc="Runs true_block or false_block by Cond; Out are the taken branch's results.",
           dtypes={"Cond": ("bool",), "Input": DTYPES}),
    schema("while", [Slot("X", duplicable=True), Slot("Input", duplicable=True, optional=True)],
           [Slot("Out", duplicable=True), Slot("History", duplicable=True), "Steps"],
           _while, {"cond_block": Attr("block"), "body_block": Attr("block"), "cond_params": Attr("strs"),
                    "cond_out": Attr("str"), "body_params": Attr("strs"), "body_outs": Attr("strs"),
                    "max_iterations": Attr("optional_int", None)},
           doc="Carries X through body_block while cond_block says so; History stacks X at each iteration's start.",
           dtypes={"X": DTYPES, "Input": DTYPES}),
)


__all__ = ["SCHEMAS"]
