"""Building and reading sub-blocks: entering one, what it reads from outside, copying one.

A control-flow op lists every var its sub-blocks read from enclosing blocks
in its ``Input`` slot, so the enclosing block's dataflow stays complete.
``external_reads`` finds those vars; nested control-flow ops already list
theirs, so one level of ops is enough.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterable, Iterator

from .errors import ProgramError
from .ops import OP_SCHEMAS

if TYPE_CHECKING:
    from .block import Block
    from .operator import Operator
    from .program import Program


def block_attrs(op) -> list[str]:
    """Names of ``op``'s attrs of kind ``block`` (each holds the index of a sub-block the op owns)."""
    schema = OP_SCHEMAS.get(op.type)
    if schema is None:
        return []
    return [name for name, spec in schema.attrs.items() if spec.kind == "block" and name in op.attrs]


def owned_blocks(op) -> list[int]:
    """Indices of the sub-blocks ``op`` owns (its attrs of kind ``block``)."""
    return [op.attrs[name] for name in block_attrs(op)]


@contextmanager
def building_block(program: "Program", block: "Block") -> Iterator["Block"]:
    """Inside the ``with``, ``layers`` functions append to ``block`` instead of the current block."""
    previous = program._current_block_idx
    program._current_block_idx = block.idx
    try:
        yield block
    finally:
        program._current_block_idx = previous


def external_reads(blocks: Iterable["Block"], exclude: Iterable[str] = ()) -> list[str]:
    """Names read by ops of ``blocks`` that none of them declares, in first-read order (minus ``exclude``)."""
    found: dict[str, None] = {}
    skip = set(exclude)
    for block in blocks:
        for op in block.ops:
            for name in op.input_arg_names:
                if name not in block.vars and name not in skip:
                    found[name] = None
    return list(found)


def check_writes_local(block: "Block", what: str) -> None:
    """A ProgramError if an op of ``block`` writes a var of an enclosing block (sub-blocks are functional)."""
    for i, op in enumerate(block.ops):
        for name in op.output_arg_names:
            if name not in block.vars:
                raise ProgramError(f"{what} (block {block.idx}), op #{i} ({op.type}) writes '{name}', a var of an "
                                   "enclosing block; a sub-block may only write its own vars (return the new "
                                   "value instead)")


def copy_vars(src: "Block", dst: "Block") -> None:
    """Declare ``src``'s vars in ``dst`` with the same names, types and flags."""
    for var in src.vars.values():
        if var.name not in dst.vars:
            dst.create_var(var.name, var.shape, var.dtype, var.persistable, var.stop_gradient, var.is_parameter,
                           var.trainable)


def copy_ops(src: "Block", dst: "Block") -> dict[int, "Operator"]:
    """Append copies of ``src``'s ops to ``dst``, in order (their vars must be declared there: ``copy_vars``).

    Returns ``id(copy) -> original``, so grad ops made for a copy can name the original instead.
    """
    originals = {}
    for op in src.ops:
        copy = dst.append_op(op.type, {s: list(n) for s, n in op.inputs.items()},
                             {s: list(n) for s, n in op.outputs.items()}, dict(op.attrs), role=op.role,
                             forward_op=op.forward_op, callsite=op.callsite)
        originals[id(copy)] = op
    return originals


def prune_unused(block: "Block", keep: Iterable[str], params: Iterable[str] = ()) -> int:
    """Remove the ops of ``block`` whose results neither ``keep`` nor a later op needs; returns how many.

    Random ops are kept (their effect is more than their result). Vars no
    remaining op uses go too, except ``keep`` and ``params`` (the block's
    parameters, bound by the owning op). Used on gradient sub-blocks, whose
    copied forward ops may feed nothing the gradient reads (a loop
    counter's increment, say).
    """
    live = set(keep)
    removed = 0
    for i in range(len(block.ops) - 1, -1, -1):
        op = block.ops[i]
        schema = OP_SCHEMAS.get(op.type)
        if not (set(op.output_arg_names) & live) and not (schema is not None and schema.stateful):
            block.remove_op(i)
            removed += 1
            continue
        live.update(op.input_arg_names)
    used = live | set(params) | {n for op in block.ops for n in op.output_arg_names}
    for name in [n for n in block.vars if n not in used]:
        block.remove_var(name)
    return removed


RESULT_ATTRS = ("true_outs", "false_outs", "body_outs", "cond_out")
"""Attrs of control-flow ops that name a sub-block's results (which may be outer vars, read by name)."""


def rename_outer_reads(program: "Program", block_ids: Iterable[int], mapping: dict[str, str]) -> None:
    """In blocks ``block_ids`` and the blocks their ops own, read ``mapping[n]`` wherever an outer ``n`` is read.

    A name declared in a block is that block's own var and is left alone there
    (and below it). Used when the backward pass redirects a gradient
    sub-block's reads to snapshots of vars the forward part overwrites.
    """
    stack = [(idx, dict(mapping)) for idx in block_ids]
    while stack:
        idx, names = stack.pop()
        block = program.blocks[idx]
        names = {n: m for n, m in names.items() if n not in block.vars}
        if not names:
            continue
        for op in block.ops:
            block.rename_inputs(op, names)
            for key in RESULT_ATTRS:
                value = op.attrs.get(key)
                if isinstance(value, list) and any(n in names for n in value):
                    block.set_attr(op, key, [names.get(n, n) for n in value])
                elif isinstance(value, str) and value in names:
                    block.set_attr(op, key, names[value])
            stack.extend((sub, names) for sub in owned_blocks(op))


__all__ = ["owned_blocks", "block_attrs", "building_block", "external_reads", "check_writes_local", "copy_vars",
           "copy_ops", "prune_unused", "RESULT_ATTRS", "rename_outer_reads"]
