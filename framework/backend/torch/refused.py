"""What the torch engine does not run, one line per op: op types without a torch kernel (control flow among them:
the engine walks block 0 only), and attrs a kernel cannot honour. The runner refuses such a program whole, before
anything runs."""
from __future__ import annotations

from gradgen.program.describe import op_location

from .kernels import KERNELS
from .kernels.tensor import NEGATIVE_STRIDES

__all__ = ["problems"]

NO_KERNEL = ("no torch kernel is written for this op type (the torch engine has the ops the anchors' workloads "
             "use, and every op with a compute; run it on numpy or xla)")


def _attr_problem(op) -> str | None:
    if op.type in ("slice", "slice_grad") and any(s < 0 for s in op.attr("strides") or ()):
        return NEGATIVE_STRIDES
    return None


def problems(block) -> list[str]:
    """Every op of ``block`` (the walked block: its sub-blocks' ops run only through an op of ``block``) that the
    torch engine cannot run, as one line each."""
    found = []
    for index, op in enumerate(block.ops):
        reason = NO_KERNEL if op.type not in KERNELS else _attr_problem(op)
        if reason is not None:
            found.append(f"{op_location(block, index, op.type, op.callsite)}: {reason}")
    return found
