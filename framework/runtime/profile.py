"""Where a run's time goes, for ``Executor(profile=True)``: every step timed, the result as plain data.

A profiling executor builds its plans with ``PlanOptions.profile`` set to its
``Profiler``, and the planner wraps each step's function in a timer
(``Profiler.timed``). An ordinary plan has no wrapper: the run loop is the same
loop, and a plan that is not profiled pays nothing.

What is measured, per program (rows of several plans of one program add up):

- each step's seconds, nested steps included (``seconds``) and excluded
  (``own_seconds``): a step of a control-flow op's sub-block runs inside the
  op's own step, so the op's ``seconds`` include it and its ``own_seconds`` do
  not. Summing ``own_seconds`` over all rows counts every second once.
- the run's time outside the step functions, by phase (``PHASES``); the run
  loop's own work between steps is the ``loop`` phase.
- plans built (and, on a compiled backend, compiles), whose time is part of
  the ``plan`` phase.
- the threads each run's engine ran its pool at (``threads``): the count the
  executor set, or what the free-core meter left it (``backend/shared/cores``).

A run that fails counts in ``failed_runs`` and nothing else: its steps' times
are dropped, so every row's ``calls`` and ``seconds`` are over the same
completed runs. Plans built by a failed run are counted (they are not built again).
"""
from __future__ import annotations

import time
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, NamedTuple

from gradgen.program.describe import op_location
from gradgen.program.subblocks import owned_blocks


__all__ = ["PHASES", "Profile", "ProfileRow", "Profiler"]

PHASES = {
    "plan": "plan lookup (and builds, one-time measuring)",
    "feeds": "feed and scope checks",
    "loop": "run loop between steps",
    "commit": "commit to the scope",
    "fetch": "fetch",
}
"""The phases of a run outside the step functions, in run order, and what each covers."""


class ProfileRow(NamedTuple):
    """One step of a run: an op, or the ops one kernel runs together (the torch engine's joint kernels,
    ``backend/torch/joint.py``)."""

    block: int
    ops: tuple[int, ...]
    """The ops the step runs (indexes in ``block``); two for a joint kernel."""
    kind: str
    """The op's type, or the types of the ops one kernel runs, joined by ``+``
    (``conv2d_input_grad+conv2d_filter_grad``)."""
    where: str
    """Where the step's last op is (``op_location``: block, index, type, source line)."""
    parent: tuple[int, int] | None
    """``(block, op index)`` of the control-flow op whose sub-block holds the step; None in block 0."""
    depth: int
    """How many control-flow ops the step is nested in."""
    calls: int
    seconds: float
    """Over the counted runs, steps nested inside (sub-block steps) included."""
    own_seconds: float
    """Over the counted runs, steps nested inside excluded."""
    engine: str = "numpy"
    """The engine that ran the step (``numpy`` or ``torch``, the engines that walk a block op by op): under
    ``backend="auto"`` an op has a row for each that ran it."""


@dataclass(frozen=True)
class Profile:
    """A program's profile: plain data, totals over ``runs`` completed runs (divide by ``runs`` for a mean)."""

    runs: int
    failed_runs: int
    seconds: float
    """The counted runs' wall time inside ``Executor.run``."""
    rows: tuple[ProfileRow, ...]
    """Every step of every plan the runs used, in block order, a sub-block's steps right after its op's row."""
    outside: dict[str, float]
    """Phase (``PHASES``) -> seconds outside the step functions."""
    plans_built: int
    plan_build_seconds: float
    """Plans built or compiled, and their time (part of ``outside["plan"]``; with no failed run,
    ``seconds == sum(own_seconds) + sum(outside)``)."""
    backend_choice: tuple[str, str] | None = None
    """``Executor(backend="auto")``: (the backend chosen for the program, why); None otherwise or while trying."""
    threads: tuple[tuple[int, int], ...] = ()
    """(threads, runs) pairs, most threads first: how many counted runs ran their engine's pool at each count (numpy's
    BLAS, torch's intra-op threads, XLA's CPU pool)."""


class _Slot:
    """A step's totals over counted runs, and what the run going on has added so far."""

    __slots__ = ("key", "kind", "calls", "seconds", "own", "run_calls", "run_seconds", "run_own")

    def __init__(self, key: tuple[int, tuple[int, ...], str], kind: str):
        self.key, self.kind = key, kind
        self.calls = self.run_calls = 0
        self.seconds = self.own = self.run_seconds = self.run_own = 0.0

    def fold(self, keep: bool) -> None:
        if keep:
            self.calls += self.run_calls
            self.seconds += self.run_seconds
            self.own += self.run_own
        self.run_calls, self.run_seconds, self.run_own = 0, 0.0, 0.0


class _Record:
    """One program version's slots and run totals."""

    def __init__(self, version: int):
        self.version = version
        self.slots: dict[tuple[int, tuple[int, ...]], _Slot] = {}
        self.backend_choice: tuple[str, str] | None = None  # ``backend="auto"``'s, kept by ``clear``
        self.clear()

    def clear(self) -> None:
        for slot in self.slots.values():
            slot.fold(False)
            slot.calls, slot.seconds, slot.own = 0, 0.0, 0.0
        self.runs = self.failed_runs = self.plans_built = 0
        self.seconds = self.plan_build_seconds = 0.0
        self.outside = dict.fromkeys(PHASES, 0.0)
        self.threads: dict[int, int] = {}
        self.run_threads: int | None = None  # the run going on's, told by its engine


class Profiler:
    """Collects step times for one executor. Runs through it take turns (the executor's run lock)."""

    def __init__(self):
        self._records: "weakref.WeakKeyDictionary[Any, _Record]" = weakref.WeakKeyDictionary()
        self._frames: list[float] = []  # per timed call running: the seconds of the calls nested in it
        self._top = 0.0  # seconds inside outermost step calls in the run going on

    def _record(self, program) -> _Record:
        record = self._records.get(program)
        if record is None or record.version != program.version:  # an edited program: its old steps are gone
            record = self._records[program] = _Record(program.version)
        return record

    def reset(self) -> None:
        """Forget everything measured so far (plans keep their timers)."""
        for record in self._records.values():
            record.clear()

    # -- planning: the timers --------------------------------------------------------------------------------
    def timed(self, fn: Callable[..., Any], block, ops: tuple[int, ...], kind: str, engine: str
              ) -> Callable[..., Any]:
        """``fn``, the step function running ops ``ops`` (indexes) of ``block`` on ``engine``, timed into that
        step's row."""
        record = self._record(block.program)
        key = (block.idx, tuple(ops), engine)
        slot = record.slots.get(key)
        if slot is None:
            slot = record.slots[key] = _Slot(key, kind)
        frames, clock = self._frames, time.perf_counter

        def run(*args):
            frames.append(0.0)
            start = clock()
            try:
                return fn(*args)
            finally:
                took = clock() - start
                nested = frames.pop()
                slot.run_calls += 1
                slot.run_seconds += took
                slot.run_own += took - nested
                if frames:
                    frames[-1] += took
                else:
                    self._top += took

        return run

    # -- running -------------------------------------------------------------------------------------------------
    def built(self, program, seconds: float) -> None:
        """A run built a plan of ``program`` in ``seconds``."""
        record = self._record(program)
        record.plans_built += 1
        record.plan_build_seconds += seconds

    def ran_threads(self, program, threads: int) -> None:
        """The run of ``program`` going on runs its engine's pool at ``threads``."""
        self._record(program).run_threads = threads

    def chose(self, program, backend: str, reason: str) -> None:
        """``backend="auto"`` chose ``backend`` for ``program`` (``runtime/auto_run``)."""
        self._record(program).backend_choice = (backend, reason)

    @contextmanager
    def run(self, program) -> Iterator[Callable[[str], None]]:
        """Around one run of ``program``: yields ``mark(phase)``, called at the end of each phase (``PHASES``);
        the time since the last mark, less the step calls in it, is the phase's. Kept only if the run succeeds."""
        record = self._record(program)
        record.run_threads = None
        self._frames.clear()
        self._top = 0.0
        phases = dict.fromkeys(PHASES, 0.0)
        clock = time.perf_counter
        last = [clock(), 0.0]  # time and ``_top`` at the last mark
        start = last[0]

        def mark(phase: str) -> None:
            now, top = clock(), self._top
            phases[phase] += (now - last[0]) - (top - last[1])
            last[0], last[1] = now, top

        try:
            yield mark
        except BaseException:
            record.failed_runs += 1
            for slot in record.slots.values():
                slot.fold(False)
            raise
        record.runs += 1
        record.seconds += last[0] - start
        if record.run_threads is not None:
            record.threads[record.run_threads] = record.threads.get(record.run_threads, 0) + 1
        for phase, seconds in phases.items():
            record.outside[phase] += seconds
        for slot in record.slots.values():
            slot.fold(True)

    # -- reading ---------------------------------------------------------------------------------------------------
    def profile(self, program) -> Profile:
        """What was measured for ``program`` (its present version)."""
        record = self._record(program)
        parents = _control_flow_parents(program)
        by_block: dict[int, list[_Slot]] = {}
        for slot in record.slots.values():
            by_block.setdefault(slot.key[0], []).append(slot)
        rows: list[ProfileRow] = []

        def add(block_idx: int, depth: int) -> None:
            block = program.block(block_idx)
            for slot in sorted(by_block.get(block_idx, ()), key=lambda s: (s.key[1][-1], s.key[2])):
                index = slot.key[1][-1]
                op = block.ops[index]
                where = op_location(block, index, op.type, op.callsite)
                rows.append(ProfileRow(block_idx, slot.key[1], slot.kind, where, parents.get(block_idx), depth,
                                       slot.calls, slot.seconds, slot.own, slot.key[2]))
                for sub in sorted(b for b, p in parents.items() if p == (block_idx, index)):
                    add(sub, depth + 1)

        add(0, 0)
        return Profile(runs=record.runs, failed_runs=record.failed_runs, seconds=record.seconds, rows=tuple(rows),
                       outside=dict(record.outside), plans_built=record.plans_built,
                       plan_build_seconds=record.plan_build_seconds,
                       backend_choice=record.backend_choice,
                       threads=tuple(sorted(record.threads.items(), reverse=True)))


def _control_flow_parents(program) -> dict[int, tuple[int, int]]:
    """Sub-block index -> ``(block, op index)`` of the control-flow op that runs it."""
    parents = {}
    for block in program.blocks:
        for index, op in enumerate(block.ops):
            for sub in owned_blocks(op):
                parents[sub] = (block.idx, index)
    return parents
