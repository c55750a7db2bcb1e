"""The order a plan runs a block's ops in: optimizer updates as early as their data allows.

``append_backward`` and the optimizers put every update after the whole
backward pass, so every gradient stays alive until the end of the run. An
update may run as soon as nothing between it and its natural place needs
the values it replaces or makes the values it reads, so this pass moves each
``optimize`` op up to right after the last op it has a data hazard with
(that op writes a var the update reads, or reads or writes a var the update
writes). Every op still sees exactly the values it saw in block order, so
results are identical; gradients die as soon as their update has run.
"""
from __future__ import annotations

from typing import Sequence


def _hazard(reads: set, writes: set, op) -> bool:
    """True when ``op`` and an op reading ``reads`` and writing ``writes`` must keep their order."""
    return (any(n in reads or n in writes for n in op.output_arg_names)
            or any(n in writes for n in op.input_arg_names))


def schedule(ops: Sequence) -> list[int]:
    """Op indexes in run order: block order with each ``optimize``-role op hoisted past ops it does not depend on.

    >>> schedule(block.ops)  # doctest: +SKIP
    [0, 1, ..., 12, 15, 13, 14, 16]
    """
    order: list[int] = []
    for i, op in enumerate(ops):
        if op.role != "optimize":
            order.append(i)
            continue
        reads, writes = set(op.input_arg_names), set(op.output_arg_names)
        at = len(order)
        while at > 0 and not _hazard(reads, writes, ops[order[at - 1]]):
            at -= 1
        order.insert(at, i)
    return order
