"""A gradient loop reads its forward loop's body values back instead of recomputing them.

The gradient of a ``while`` (``grad_makers/control_flow.py``) walks the forward iterations in reverse: each
reverse iteration reads its forward iteration's loop values from History at row ``index`` and re-runs the
forward body's ops (a recompute) before the backward ops. On XLA the forward loop can keep those ops' values
too, row ``t`` in iteration ``t`` (a stash, like History), and the reverse loop read row ``index`` back: the
same values, without the recompute (for an Elman RNN, two of its seven matmuls per step). Stashed values no
reverse op reads are dropped by XLA with their buffers.

A reverse body's op is read back when it is an op of the forward body (same type, attrs, inputs, outputs) and
each input is the value it had in forward iteration ``index``: a loop value read from History at ``index``, an
outer var both loops get as the same traced value, or an output of an op read back. Anything else, or a
reverse loop whose counter is not ``Steps - 1, Steps - 2, ...`` of that forward loop, recomputes as before.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ReadBack", "Replay", "Stash", "read_back_block", "replay", "replays_of", "stash_read", "stashes"]


@dataclass(frozen=True)
class Replay:
    """How reverse loop ``reverse`` reads forward loop ``forward``'s body back."""

    pairs: tuple[tuple[int, int], ...]
    """(forward body op index, reverse body op index) of each op read back."""
    names: tuple[str, ...]
    """The vars those ops make: what the forward loop stashes."""
    outer: tuple[str, ...]
    """Outer vars the read-back ops read: both loops must get them as the same traced value."""


@dataclass
class Stash:
    """A traced forward loop's stash: buffers ``[rows, ...]`` by var name, its Steps and its outer values."""

    buffers: dict[str, Any]
    steps: Any
    outer: dict[str, Any]


def stashes(ctx) -> dict[tuple, Stash]:
    """The stashes of the loops traced so far in ``ctx``'s trace, by the loop's History names."""
    found = getattr(ctx, "_loop_stashes", None)
    if found is None:
        found = {}
        object.__setattr__(ctx, "_loop_stashes", found)
    return found


def _signature(op) -> tuple:
    return (op.type, repr(sorted(op.attrs.items())), tuple((k, tuple(v)) for k, v in op.inputs.items()),
            tuple((k, tuple(v)) for k, v in op.outputs.items()))


def _writes(block) -> dict[str, int]:
    counts: dict[str, int] = {}
    for op in block.ops:
        for n in op.output_arg_names:
            counts[n] = counts.get(n, 0) + 1
    return counts


def _maker(block, name: str):
    """The op of ``block`` that writes ``name``, or None (none, or several)."""
    found = [op for op in block.ops if name in op.output_arg_names]
    return found[0] if len(found) == 1 else None


def _counts_down(reverse_body, params: list[str], outs: list[str]) -> str | None:
    """The var ``index = counter - 1`` that is also the counter's next value, or None."""
    index = outs[0] if outs else None
    sub = _maker(reverse_body, index) if index else None
    if sub is None or sub.type != "elementwise_sub" or sub.input("X") != params[:1]:
        return None
    one = _maker(reverse_body, sub.input("Y")[0])
    if one is None or one.type != "fill_constant" or one.attr("value") != 1 or list(one.attr("shape")) != []:
        return None
    return index


def replay(forward, reverse) -> Replay | None:
    """Which ops of ``reverse``'s body can read ``forward``'s body back (None: none can)."""
    program = forward.block.program
    body, rbody = program.block(forward.attr("body_block")), program.block(reverse.attr("body_block"))
    params, history = forward.attr("body_params"), forward.output("History")
    index = _counts_down(rbody, reverse.attr("body_params"), reverse.attr("body_outs"))
    if index is None:
        return None
    writes, rwrites = _writes(body), _writes(rbody)
    available = {op.output("Out")[0] for op in rbody.ops
                 if op.type == "gather" and op.attr("axis") == 0 and op.input("Index") == [index]
                 and op.input("X")[0] in history and op.output("Out") == [params[history.index(op.input("X")[0])]]
                 and rwrites.get(op.output("Out")[0]) == 1}
    shared = (set(forward.input("Input")) & set(reverse.input("Input"))) - set(writes) - set(rwrites)
    in_body = {_signature(op): k for k, op in enumerate(body.ops)}
    pairs, names, outer = [], [], set()
    for j, op in enumerate(rbody.ops):
        k = in_body.get(_signature(op))
        outs = op.output_arg_names
        if k is None or any(writes.get(n) != 1 or rwrites.get(n) != 1 or n in params for n in outs):
            continue
        if all(n in available or n in shared for n in op.input_arg_names):
            pairs.append((k, j))
            names += outs
            available.update(outs)
            outer.update(n for n in op.input_arg_names if n in shared)
    return Replay(tuple(pairs), tuple(names), tuple(sorted(outer))) if pairs else None


def replays_of(forward) -> list[tuple[Any, Replay]]:
    """The reverse loops (in ``forward``'s block) that read ``forward``'s History, each with its replay."""
    history = set(forward.output("History"))
    program = forward.block.program
    found = []
    for op in forward.block.ops:
        if op.type != "while" or op is forward:
            continue
        rbody = program.block(op.attr("body_block"))
        if any(o.type == "gather" and history.intersection(o.input("X")) for o in rbody.ops):
            plan = replay(forward, op)
            if plan is not None:
                found.append((op, plan))
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
    """``block`` (a reverse body) with ``plan``'s ops reading ``values`` instead of computing them."""
    replaced = {j for _, j in plan.pairs}
    return _ReadBackBlock(block, [ReadBack(op, values) if j in replaced else op for j, op in enumerate(block.ops)])


def stash_read(op, ctx):
    """The lowering of a ``ReadBack``: the values read back, in its origin's output order."""
    values = [op.values[n] for n in op.output_arg_names]
    return lambda: values[0] if len(values) == 1 else tuple(values)
