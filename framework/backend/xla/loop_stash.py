"""The xla side of a gradient loop reading its forward loop's body back (``shared/loop_read_back`` decides
which ops): the forward loop's stash, row ``t`` written in iteration ``t``, and the stand-ins that make the reverse
body's read-back ops yield the rows read back instead of computing. Stashed values no reverse op reads are
dropped by XLA with their buffers, and two kinds need no row of their own (``rows_already_kept``): a value the
loop carries to its next iteration, and a gather of an outer array at a loop var.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import jax.numpy as jnp
import numpy as np
from jax import lax

from ..shared.attrs import op_axis
from ..shared.loop_read_back import Replay
from gradgen.program.ops.manipulation import take

from .xp import XP

__all__ = ["ReadBack", "Stash", "counts_up", "gather_at_loop_var", "next_start", "read_back_block", "regather",
           "row_reader", "rows_already_kept", "stash_read", "stashes"]


@dataclass
class Stash:
    """A traced forward loop's stash: by var name, ``row(t)`` -> the var's value in iteration ``t``; its Steps and
    its outer values."""

    rows: dict[str, Callable[[Any], Any]]
    steps: Any
    outer: dict[str, Any]


def stashes(ctx) -> dict[tuple, Stash]:
    """The stashes of the loops traced so far in ``ctx``'s trace, by the loop's History names."""
    found = getattr(ctx, "_loop_stashes", None)
    if found is None:
        found = {}
        object.__setattr__(ctx, "_loop_stashes", found)
    return found


class ReadBack:
    """Stands for op ``origin`` of a reverse body while it is traced: its outputs are ``values`` (rows read back
    from the stash), through the ``stash_read`` lowering; errors and provenance still name ``origin``'s place."""

    type = "stash_read"

    def __init__(self, origin, values: dict[str, Any]):
        self.origin, self.values = origin, values
        self.callsite = origin.callsite
        self.output_arg_names = origin.output_arg_names
        self.input_arg_names: list[str] = []


class _ReadBackBlock:
    """``block`` with some ops replaced by ``ReadBack``s (everything else is the block's own)."""

    def __init__(self, block, ops: list):
        self._block, self.ops = block, ops

    def __getattr__(self, name: str):
        return getattr(self._block, name)


def read_back_block(block, plan: Replay, values: dict[str, Any]):
    """``block`` (a reverse body) with ``plan``'s ops, and its History reads, yielding ``values`` instead of
    computing them (the History rows unchecked: linked, the row is below the forward loop's Steps)."""
    replaced = {j for _, j in plan.pairs} | {j for j, _ in plan.rows}
    return _ReadBackBlock(block, [ReadBack(op, values) if j in replaced else op for j, op in enumerate(block.ops)])


def stash_read(op, ctx):
    """The lowering of a ``ReadBack``: the values read back, in its origin's output order."""
    values = [op.values[n] for n in op.output_arg_names]
    return lambda: values[0] if len(values) == 1 else tuple(values)


def rows_already_kept(op, body, kept: Sequence[str]) -> tuple[dict[str, int], dict[str, tuple[int, str, int]]]:
    """Which values to read back need no stash row of their own, each iteration's value being kept already:
    (name -> loop var ``k`` whose next value it is: row ``t`` is History ``k``'s row ``t + 1``, or the loop's
    result after the last iteration; name -> (body op index, outer var ``X``, loop var ``k``) of a ``gather`` of
    an outer ``X`` at loop var ``k``: row ``t`` is ``X`` gathered again at History ``k``'s row ``t``, an index the
    forward run has checked). One row write less per iteration for each, where XLA's loop pays per operation."""
    outs = op.attr("body_outs")
    carried = {name: outs.index(name) for name in kept if name in outs}
    regathered = {}
    for j, o in enumerate(body.ops):
        at = gather_at_loop_var(op, body, o)
        if at is not None and o.output("Out")[0] in kept and o.output("Out")[0] not in carried:
            regathered[o.output("Out")[0]] = (j, *at)
    return carried, regathered


def gather_at_loop_var(op, body, gather) -> tuple[str, int] | None:
    """(outer var ``X``, loop var ``k``) when ``gather``, an op of ``op``'s body, gathers an array the loop only
    reads at a loop var as it starts an iteration; else None."""
    if gather.type != "gather":
        return None
    x, index, params = gather.input("X")[0], gather.input("Index")[0], op.attr("body_params")
    if index not in params or x not in op.input("Input") or any(x in o.output_arg_names for o in body.ops):
        return None
    return x, params.index(index)


def row_reader(buffer) -> Callable:
    return lambda t: lax.dynamic_index_in_dim(buffer, t, 0, False)


def next_start(history, final, steps) -> Callable:
    """Row ``t`` of a loop var's next value: its History row ``t + 1``, or its final value after the last row."""
    return lambda t: jnp.where(t + 1 < steps, lax.dynamic_index_in_dim(history, t + 1, 0, False), final)


def regather(gather, x, index_history, index_start=None) -> Callable:
    """Row ``t`` of ``gather``'s output: ``x`` gathered at History row ``t`` of its index (checked when the forward
    loop gathered it), or at ``index_start + t`` for an index that counts up by one."""
    axis = op_axis(gather)

    def row(t):
        index = lax.dynamic_index_in_dim(index_history, t, 0, False) if index_start is None else index_start + t
        size = x.shape[axis]
        return take(XP, x, jnp.where(index < 0, index + size, index), axis)  # gather's compute, past its check

    return row


def counts_up(op, body, k: int) -> bool:
    """Whether loop var ``k`` of ``op`` gains exactly 1 each iteration (its History row ``t`` is its start + t)."""
    param, out = op.attr("body_params")[k], op.attr("body_outs")[k]
    adds = [o for o in body.ops if out in o.output_arg_names]
    if len(adds) != 1 or adds[0].type != "elementwise_add" or adds[0].input("X") != [param]:
        return False
    step = adds[0].input("Y")[0]
    for block in (body, op.block):  # the 1 is made in the body, or outside and handed in
        makers = [o for o in block.ops if step in o.output_arg_names]
        if makers:
            one = makers[0]
            return (len(makers) == 1 and one.type == "fill_constant" and one.attr("value") == 1
                    and list(one.attr("shape")) == [] and np.dtype(one.attr("dtype")).kind in "iu"
                    and (block is body or step in op.input("Input")))
    return False
