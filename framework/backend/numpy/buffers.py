"""The plan's memory plan: buffers it owns and hands to kernels that can write into them.

Allocating a fresh array per op costs page faults and allocator churn on big
arrays (a 64 MiB gradient is faulted in anew each step). So at plan time each
output of a kernel that takes ``out`` (``kernels.signature``) gets a **slot**: a
plan-owned array reused by every var the slot serves. Vars share a slot when
their lifetimes in the scheduled order do not overlap and their declared type
is the same; slots live across runs.

Static liveness is not the whole truth (a kernel may return a view of its
input, a caller may hold a fetched view), so a slot's array is only written
when nothing but the slot refers to it: ``sys.getrefcount`` says so, in
tens of nanoseconds. Otherwise the kernel gets no buffer and allocates, and
the slot takes the fresh array. Kernels thus never write over a value anyone
can still see.

Parameter updates (``sgd``, ``momentum``, ``adam``) get a slot of their own per output. The commit puts the
slot's array in the scope and, when nothing else holds the scope's previous
array, makes that the slot's next buffer (double buffering): updates write
in place, yet a failed run leaves the scope untouched and an array read
from the scope keeps its values.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

_SMALL = 1024
"""Outputs of a fully static shape below this many elements are left to numpy's own small-array cache."""


@dataclass
class Buffers:
    """Arrays a plan owns: ``slots[k]`` is slot k's array (None until first used); ``swaps`` maps updated
    persistable vars to their slot, for the commit's double buffering; ``by_step`` is the assignment."""

    slots: list = field(default_factory=list)
    swaps: dict[str, int] = field(default_factory=dict)
    by_step: dict[int, Any] = field(default_factory=dict)
    """Step position -> the slot its output is written into (a tuple of slots for an update with several)."""

    def nbytes(self) -> int:
        """Bytes the plan holds between runs."""
        return sum(a.nbytes for a in self.slots if a is not None)

    def recycle(self, name: str, old: Any) -> None:
        """Make ``old`` (the scope's array just replaced by ``name``'s update) the slot's next buffer, if unshared."""
        # References: the caller's, our argument, getrefcount's argument.
        unshared = sys.getrefcount(old) <= 3  # before .flags, whose object holds a reference too
        if unshared and isinstance(old, np.ndarray) and old.flags.writeable and old.flags.owndata:
            self.slots[self.swaps[name]] = old


def _worth_a_slot(var) -> bool:
    if -1 in var.shape:
        return True
    size = 1
    for d in var.shape:
        size *= d
    return size >= _SMALL


def _updates_in_place(block, unit, writers: Mapping[str, int]) -> bool:
    """A unit whose outputs are all persistable, each also one of its inputs and written by no other unit
    (an optimizer update: the parameter, and the optimizer's state for momentum or adam)."""
    return all(block.var(n).persistable and n in unit.ins and writers.get(n) == 1 for n in unit.outs)


def assign_slots(block, units: Sequence, writes_into: set[int], dying: Mapping[int, Sequence[str]],
                 keep: set) -> tuple[dict[int, Any], dict[str, int], int]:
    """Slots for the ``units`` in run order: (position -> slot, updated persistable var -> slot, slot count).

    A unit is anything with ``ins`` and ``outs`` (var names): an op, or a fused
    group of them (``plan_data.Unit``). An in-place update with several
    outputs gets a tuple of slots, one per output.

    ``writes_into`` are the positions whose kernel takes ``out``;
    ``dying[p]`` the vars that die right after position p; ``keep`` the
    fetched vars, which never get a slot (the caller owns what it fetches).
    """
    writers: dict[str, int] = {}
    for unit in units:
        for name in unit.outs:
            writers[name] = writers.get(name, 0) + 1
    by_step: dict[int, int] = {}
    swaps: dict[str, int] = {}
    free: dict[tuple, list[int]] = {}
    slot_key: dict[str, tuple] = {}
    slot_of: dict[str, int] = {}
    count = 0
    for at, unit in enumerate(units):
        outs = unit.outs
        if at in writes_into and _updates_in_place(block, unit, writers):
            ks = tuple(range(count, count + len(outs)))
            swaps.update(zip(outs, ks))
            by_step[at] = ks[0] if len(ks) == 1 else ks
            count += len(ks)
        elif at in writes_into and len(outs) == 1:
            var = block.var(outs[0])
            if not var.persistable and outs[0] not in keep and writers[outs[0]] == 1 and _worth_a_slot(var):
                key = (tuple(var.shape), var.dtype)
                k = free[key].pop() if free.get(key) else None
                if k is None:
                    k, count = count, count + 1
                by_step[at] = slot_of[outs[0]] = k
                slot_key[outs[0]] = key
        for name in dying.get(at, ()):
            if name in slot_of:
                free.setdefault(slot_key[name], []).append(slot_of.pop(name))
    return by_step, swaps, count


def slotted(fn: Callable[..., Any], slots: list, k: int | tuple[int, ...]) -> Callable[..., Any]:
    """A step function running kernel ``fn`` with slot k's array as its ``out`` when nothing else holds it.

    With a tuple of slots, ``fn`` gets a tuple of buffers and returns a tuple of results.
    """
    if isinstance(k, tuple):
        return _slotted_many(fn, slots, k)

    def run(*args):
        buf = slots[k]
        # References: slots[k], buf, getrefcount's argument. Any more and someone can still see it.
        if buf is not None and sys.getrefcount(buf) > 3:
            buf = None
        slots[k] = result = fn(*args, out=buf)
        return result

    return run


def _slotted_many(fn: Callable[..., Any], slots: list, ks: tuple[int, ...]) -> Callable[..., Any]:
    def run(*args):
        bufs = []
        for k in ks:
            buf = slots[k]
            # References: slots[k], buf, getrefcount's argument, as in ``slotted``.
            bufs.append(buf if buf is not None and sys.getrefcount(buf) <= 3 else None)
        results = fn(*args, out=tuple(bufs))
        for k, r in zip(ks, results):
            slots[k] = r
        return results

    return run
