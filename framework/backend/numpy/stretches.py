"""Fusing a stretch of plan units into one (``fuse_region``): which units a stretch replaces, which of its
outputs anyone needs afterwards, how an outside input is read inside a loop over the stretch's shape, and the
stretch's ops run one by one with their ordinary kernels (its warm runs, and run-time shapes its compiled
loop does not cover): never a wrong answer, only a slower one.
"""
from __future__ import annotations

from operator import itemgetter
from typing import Any, Callable, Mapping, Sequence

from .kernels import takes_out, with_out
from .plan_data import Step, Unit
from .run import InnerOpFailed, StepFailed, run_steps

__all__ = ["element_index", "input_kind", "needed_outputs", "op_by_op", "readers_of", "replace_stretches"]

def input_kind(declared: tuple, group: tuple) -> str | None:
    """How an outside input of declared shape ``declared`` is read in a loop over ``group``:
    'full' (same shape), 'one' (a single number), 'bcast' (numpy broadcasting), or None (it cannot be)."""
    if declared == group:
        return "full"
    if all(d == 1 for d in declared):
        return "one"
    if len(declared) > len(group):
        return None
    tail = group[len(group) - len(declared):]
    return "bcast" if all(d == g or d == 1 for d, g in zip(declared, tail)) else None


def replace_stretches(units: Sequence[Unit],
                      stretch_at: Callable[[int, Mapping[str, list[int]]], tuple[Unit | None, int]]) -> list[Unit]:
    """``units`` with stretches replaced: ``stretch_at(at, readers)`` gives the unit replacing ``units[at:end]``
    and ``end``, or (None, _) to keep ``units[at]``; ``readers`` is ``readers_of(units)``."""
    readers = readers_of(units)
    fused: list[Unit] = []
    at = 0
    while at < len(units):
        unit, end = stretch_at(at, readers)
        if unit is None:
            fused.append(units[at])
            at += 1
        else:
            fused.append(unit)
            at = end
    return fused


def readers_of(units: Sequence[Unit]) -> dict[str, list[int]]:
    """Var name -> the positions of the units that read it."""
    readers: dict[str, list[int]] = {}
    for at, unit in enumerate(units):
        for name in unit.ins:
            readers.setdefault(name, []).append(at)
    return readers


def needed_outputs(block, members: Sequence[Unit], end: int, readers: Mapping[str, list[int]],
                   keep: set) -> list[str]:
    """The vars ``members`` (the units before position ``end``) make that someone needs afterwards (read later,
    fetched, or persistable), in the order they are made."""
    outs: list[str] = []
    for unit in members:
        for name in unit.outs:
            later = readers.get(name, (-1,))[-1] >= end  # positions ascend: the last reader decides
            if (later or name in keep or block.var(name).persistable) and name not in outs:
                outs.append(name)
    return outs


def element_index(kind: str, declared: tuple, group: tuple) -> str:
    """The index text reading one element of an input of ``kind`` and declared shape inside a loop over ``group``'s
    shape (loop variables ``i0, i1, ...``): a declared size-1 dim that broadcasts reads index 0."""
    rank = len(group)
    if kind == "full":
        return "[" + ", ".join(f"i{d}" for d in range(rank)) + "]"
    lead = rank - len(declared)
    return "[" + ", ".join("0" if d == 1 and group[lead + j] != 1 else f"i{lead + j}"
                           for j, d in enumerate(declared)) + "]"


def op_by_op(block, units: Sequence[Unit], ins: Sequence[str], outs: Sequence[str], kernels) -> Callable[..., Any]:
    """``units`` run one by one with their ordinary kernels (warm runs, and run-time shapes a generated loop does
    not cover), each value dropped after its last use among them, as the plan would."""
    last: dict[str, int] = {}
    for at, u in enumerate(units):
        for name in u.ins:
            last[name] = at
    dying: list[list[str]] = [[] for _ in units]
    kept = set(outs)
    for name, at in last.items():
        if name not in kept:
            dying[at].append(name)
    steps = []
    for at, u in enumerate(units):
        fn = with_out(u.kernel or kernels[block.ops[u.index].type](block.ops[u.index]))
        take = u.ins[0] if len(u.ins) == 1 else itemgetter(*u.ins) if u.ins else None
        steps.append(Step(fn=fn, take=take, nargs=len(u.ins), out=u.outs[0] if len(u.outs) == 1 else None,
                          outs=u.outs, dead=tuple(dying[at]), ins=u.ins, index=u.index, ops=u.ops))

    if len(steps) == 1 and takes_out(steps[0].fn) and tuple(steps[0].outs) == tuple(outs):
        alone = steps[0].fn  # a single unit: its own kernel, writing into the plan's buffers
        return lambda *arrays, out=None: alone(*arrays, out=out)

    def run(*arrays, out=None):
        env = dict(zip(ins, arrays))
        del arrays
        try:
            run_steps(steps, env)  # the plan's own loop: until a region is compiled, this is its every call
        except StepFailed as failed:  # name the op that failed, with its inputs, as an unfused run would
            step = steps[failed.position]
            raise InnerOpFailed(step.index, {n: env.get(n) for n in step.ins}, failed.error) from failed.error
        values = tuple(env[n] for n in outs)
        return values[0] if len(values) == 1 else values

    return run
