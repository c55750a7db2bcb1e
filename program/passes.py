"""Passes over programs that need nothing beyond the IR: ``Program -> Program`` edits."""
from __future__ import annotations

from .ops import OP_SCHEMAS
from .subblocks import owned_blocks


def strip_for_test(program) -> None:
    """Turn a training program into an inference one, in place.

    Drops every backward and optimize op (in every block) and the vars that
    only those ops wrote, and sets ``is_test`` on every op whose schema has
    that attr (dropout becomes the identity, batch norm uses its running
    statistics).
    """
    orphans: set[int] = set()
    for block in program.blocks:
        kept, dropped = [], []
        for op in block.ops:
            (kept if op.role == "forward" else dropped).append(op)
        still_used = {n for op in kept for n in op.input_arg_names + op.output_arg_names}
        for op in dropped:
            for name in op.output_arg_names:
                var = block.vars.get(name)
                if name not in still_used and var is not None and not var.persistable:
                    del block.vars[name]
        block.ops[:] = kept
        orphans.update(b for op in dropped for b in owned_blocks(op))
        for op in kept:
            schema = OP_SCHEMAS.get(op.type)
            if schema is not None and "is_test" in schema.attrs:
                op.attrs["is_test"] = True
    _remove_blocks(program, orphans)
    program._touch()


def _remove_blocks(program, doomed: set[int]) -> None:
    """Drop the blocks in ``doomed`` and every block their ops own; renumber the rest and their references."""
    stack = list(doomed)
    while stack:
        for op in program.blocks[stack.pop()].ops:
            for b in owned_blocks(op):
                if b not in doomed:
                    doomed.add(b)
                    stack.append(b)
    if not doomed:
        return
    survivors = [b for b in program.blocks if b.idx not in doomed]
    new_index = {b.idx: i for i, b in enumerate(survivors)}
    for block in survivors:
        block.idx = new_index[block.idx]
        block.parent_idx = new_index[block.parent_idx] if block.parent_idx >= 0 else -1
        for op in block.ops:
            schema = OP_SCHEMAS.get(op.type)
            for name, spec in (schema.attrs.items() if schema is not None else ()):
                if spec.kind == "block" and name in op.attrs:
                    op.attrs[name] = new_index[op.attrs[name]]
    program.blocks[:] = survivors
