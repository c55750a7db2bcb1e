"""Which of a gradient loop's ops may read its forward loop's body values back instead of recomputing them.

The gradient of a ``while`` (``grad_makers/control_flow.py``) walks the forward iterations in reverse: each
reverse iteration reads its forward iteration's loop values from History at row ``index`` and re-runs the
forward body's ops (a recompute) before the backward ops. A backend may let the forward loop keep those ops'
values too, one row per iteration (a stash, like History), and the reverse loop read row ``index`` back: the
same values, without the recompute (for an Elman RNN, two of its seven matmuls per step). Both backends do:
the xla one in its traced loops (``backend/xla/lowerings/control_flow.py``), the numpy one in its loop kernels
(``backend/numpy/kernels/control_flow.py``).

A reverse body's op is read back when it is an op of the forward body (same type, attrs, inputs, outputs) and
each input is the value it had in forward iteration ``index``: a loop value read from History at ``index``, an
outer var both loops get as the same value, or an output of an op read back. Anything else, or a reverse loop
whose counter is not ``Steps - 1, Steps - 2, ...`` of that forward loop, recomputes as before. This module
decides from the program alone; whether the two loops did get the same counter and outer values is for the
backend to check when they run (the same traced value, the same array object).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Replay", "forward_read_back", "replay", "replays_of"]


@dataclass(frozen=True)
class Replay:
    """How reverse loop ``reverse`` reads forward loop ``forward``'s body back."""

    pairs: tuple[tuple[int, int], ...]
    """(forward body op index, reverse body op index) of each op read back."""
    names: tuple[str, ...]
    """The vars those ops make."""
    outer: tuple[str, ...]
    """Outer vars the read-back ops read: both loops must get them as the same value."""
    needed: tuple[str, ...]
    """Those of ``names`` the rest of the reverse body reads or returns: what the forward loop must stash."""
    dead: tuple[int, ...]
    """Reverse body ops (History reads) that only the read-back ops read: with those read back, nothing needs
    them."""
    rows: tuple[tuple[int, str], ...]
    """(reverse body op index, History var) of each History read at row ``counter - 1``: a row below the forward
    loop's ``Steps`` whenever the two loops are linked (the gradient loop starts at those ``Steps``)."""


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
    history_reads = {j: op.output("Out")[0] for j, op in enumerate(rbody.ops)
                     if op.type == "gather" and op.attr("axis") == 0 and op.input("Index") == [index]
                     and op.input("X")[0] in history and op.output("Out") == [params[history.index(op.input("X")[0])]]
                     and rwrites.get(op.output("Out")[0]) == 1}
    available = set(history_reads.values())
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
    if not pairs:
        return None
    replaced = {j for _, j in pairs}
    kept_reads = {n for j, op in enumerate(rbody.ops) if j not in replaced for n in op.input_arg_names}
    kept_reads.update(reverse.attr("body_outs"))
    dead = tuple(sorted(j for j, n in history_reads.items() if n not in kept_reads))
    needed = tuple(n for n in names if n in kept_reads)
    rows = tuple((j, rbody.ops[j].input("X")[0]) for j in sorted(history_reads))
    return Replay(tuple(pairs), tuple(names), tuple(sorted(outer)), needed, dead, rows)


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


def forward_read_back(op) -> tuple[Any, Replay] | None:
    """(forward loop, Replay) when ``op`` is a gradient loop that can read that loop's body back, else None."""
    for forward in op.block.ops:
        if forward.type == "while" and forward is not op:
            for reverse, plan in replays_of(forward):
                if reverse is op:
                    return forward, plan
    return None
