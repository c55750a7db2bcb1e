"""What the torch engine does not run, one line per op: op types without a torch kernel (control flow among them:
the engine walks block 0 only). A kernel runs every op of its type (where ATen's fused call does not take an op's
dtype or attrs, the kernel takes the op's own math: the recurrences step by step, ``kernels/recurrence``). The
runner refuses such a program whole, before anything runs."""
from __future__ import annotations

from gradgen.program.describe import op_location

from .kernels import KERNELS

__all__ = ["problems"]

NO_KERNEL = ("no torch kernel is written for this op type (the torch engine has the ops the anchors' workloads "
             "use, and every op with a compute; run it on numpy or xla)")


def problems(block) -> list[str]:
    """Every op of ``block`` (the walked block: its sub-blocks' ops run only through an op of ``block``) that the
    torch engine cannot run, as one line each."""
    found = []
    for index, op in enumerate(block.ops):
        if op.type not in KERNELS:
            found.append(f"{op_location(block, index, op.type, op.callsite)}: {NO_KERNEL}")
    return found
