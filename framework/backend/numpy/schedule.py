"""The order a plan runs a block's ops in: optimizer updates as early as their data allows.

``append_backward`` and the optimizers put every update after the whole
backward pass, so every gradient stays alive until the end of the run. An
update may run as soon as nothing between it and its natural place needs
the values it replaces or makes the values it reads, so this pass moves each
``optimize`` op up to right after the last op it has a data hazard with
(that op writes a var the update reads, or reads or writes a var the update
writes). Every op still sees exactly the values it saw in block order, so
results are identical; gradients die as soon as their update has run.

The last op with a hazard is found from two indexes kept along the way, the
latest writer and the latest reader of each var in run order, so the pass is
linear in the block's size (run-order comparisons are O(1), see
``ordered_list``).
"""
from __future__ import annotations

from typing import Sequence

from .ordered_list import HEAD, OrderedList


def schedule(ops: Sequence) -> list[int]:
    """Op indexes in run order: block order with each ``optimize``-role op hoisted past ops it does not depend on.

    >>> schedule(block.ops)  # doctest: +SKIP
    [0, 1, ..., 12, 15, 13, 14, 16]
    """
    order = OrderedList()
    last_writer: dict[str, int] = {}
    last_reader: dict[str, int] = {}
    for i, op in enumerate(ops):
        reads, writes = op.input_arg_names, op.output_arg_names
        if op.role != "optimize":
            order.append(i)
        else:
            hazards = [last_writer[n] for n in (*reads, *writes) if n in last_writer]
            hazards += [last_reader[n] for n in writes if n in last_reader]
            order.insert_after(max(hazards, key=order.label.__getitem__, default=HEAD), i)
        for n in reads:
            if order.label[last_reader.get(n, HEAD)] < order.label[i]:
                last_reader[n] = i
        for n in writes:  # a writer runs after every earlier reader and writer of the var: the latest one
            last_writer[n] = i
    return list(order)
