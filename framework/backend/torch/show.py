"""What ``gradgen show PROGRAM --backend torch`` prints: the torch engine's steps for a run, in run order, each with
the op (or joint pair of ops) it runs, what it writes, which kernel runs it and the vars freed after it. The
engine's counterpart of the numpy plan listing (``tools/plan_listing``) and of xla's lowered program: the engine
walks these steps eagerly, so this is all there is to what it was "compiled" to.

    step 20: op #51 conv2d_input_grad + op #52 conv2d_filter_grad -> x@GRAD, w@GRAD; joint kernel (conv.py: one
    call for 2 ops)
"""
from __future__ import annotations

from typing import Hashable, Sequence

from gradgen.program import OP_SCHEMAS

from ..shared.signature import run_signature
from .kernels import FAMILIES, FASTER, KERNELS
from .walk import build_steps

__all__ = ["kernel_source", "lowered_text"]


def _family(key: Hashable, table: str = "KERNELS") -> str | None:
    """The kernels module whose ``table`` has ``key`` (an op type; a pair of them in ``JOINT``), by file name."""
    return next((f"{family.__name__.rsplit('.', 1)[-1]}.py" for family in FAMILIES
                 if key in getattr(family, table, {})), None)


def kernel_source(op_type: str) -> str:
    """Where the torch engine's kernel for ``op_type`` comes from, in words: the op's own statement of its math
    (``compute``, and its ATen call where the schema names one), a hand-written kernel and its file, or none."""
    schema = OP_SCHEMAS[op_type]
    if op_type not in KERNELS:
        return "none: the engine cannot run it (refused.problems)"
    if op_type in FASTER:
        return f"hand-written ({_family(op_type)}), kept over its compute: {FASTER[op_type]}"
    if schema.compute is None:
        return f"hand-written ({_family(op_type)})"
    stated = schema.compute.__module__
    if schema.aten is None:
        return f"its compute ({stated}) over torch"
    values = "any values" if schema.aten_any_values else "finite inputs"
    return f"its ATen call ({stated}) on {values} of float32/64, else its compute"


def lowered_text(program, feed_names: Sequence[str], fetch_names: Sequence[str]) -> str:
    """One line per step of block 0 for a run fed ``feed_names`` and fetching ``fetch_names``, then a count."""
    block = program.global_block()
    steps = build_steps(block, run_signature(block, feed_names, fetch_names))
    lines = []
    for at, step in enumerate(steps):
        types = tuple(block.ops[i].type for i in step.ops)
        ran = " + ".join(f"op #{i} {t}" for i, t in zip(step.ops, types))
        if len(types) > 1:
            how = f"joint kernel ({_family(types, 'JOINT')}: one call for {len(types)} ops)"
        else:
            how = kernel_source(types[0])
        frees = f"; frees {', '.join(step.dead)}" if step.dead else ""
        lines.append(f"step {at}: {ran} -> {', '.join(step.outs) or '-'}; {how}{frees}")
    lines.append(f"{len(steps)} steps for {len(block.ops)} ops (a joint kernel runs two), in block order")
    return "\n".join(lines) + "\n"
