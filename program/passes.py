"""Passes over programs that need nothing beyond the IR: ``Program -> Program`` edits."""
from __future__ import annotations

from .ops import OP_SCHEMAS


def strip_for_test(program) -> None:
    """Turn a training program into an inference one, in place.

    Drops every backward and optimize op (in every block) and the vars that
    only those ops wrote, and sets ``is_test`` on every op whose schema has
    that attr (dropout becomes the identity, batch norm uses its running
    statistics).
    """
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
        for op in kept:
            schema = OP_SCHEMAS.get(op.type)
            if schema is not None and "is_test" in schema.attrs:
                op.attrs["is_test"] = True
    program._touch()
