"""Passes over programs that need nothing beyond the IR: ``Program -> Program`` edits through Block methods."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .ops import OP_SCHEMAS
from .subblocks import owned_blocks

if TYPE_CHECKING:
    from .program import Program


def strip_for_test(program: "Program") -> None:
    """Turn a training program into an inference one, in place.

    Drops every backward and optimize op (in every block) and the vars that
    only those ops wrote, and sets ``is_test`` on every op whose schema has
    that attr (dropout becomes the identity, batch norm uses its running
    statistics). The sub-blocks only dropped ops owned go too, and the rest
    are renumbered (``Program.remove_blocks``).
    """
    orphans: set[int] = set()
    for block in program.blocks:
        dropped = [i for i, op in enumerate(block.ops) if op.role != "forward"]
        removed = block.remove_ops(dropped)
        still_used = {n for op in block.ops for n in op.input_arg_names + op.output_arg_names}
        for op in removed:
            for name in op.output_arg_names:
                var = block.vars.get(name)
                if name not in still_used and var is not None and not var.persistable:
                    block.remove_var(name)
        orphans.update(b for op in removed for b in owned_blocks(op))
        for op in block.ops:
            schema = OP_SCHEMAS.get(op.type)
            if schema is not None and "is_test" in schema.attrs:
                block.set_attr(op, "is_test", True)
    program.remove_blocks(orphans)


__all__ = ["strip_for_test"]
