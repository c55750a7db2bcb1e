"""What is in memory during a run: bytes live after each op, the peak, and who holds it.

The analysis follows the executor's own plan, in its run order: an op's
outputs come alive when it runs, a var dies right after its last use unless
it is fetched or persistable, and persistable outputs stay staged until the
run commits. The peak of that is the lower bound for the schedule. Outputs
written into the plan's buffers (``framework.buffers``) cost nothing after
the first run, so the report also gives what the first run and a later run
allocate, and what the plan holds between runs.
Feeds and the persistable values read from the scope are the resting state
and are reported apart. -1 dims are sized from the feed shapes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..runtime.plan import build_plan
from .summary import format_bytes


@dataclass(frozen=True)
class MemoryReport:
    """``live_after[i]``: bytes of run-made arrays alive after step i (op ``ops[i]``, in run order); the
    peak (the lower bound for this schedule) is during step ``peak_op``.

    ``first_run_peak``: the most a first run has allocated at once (plan
    buffers filled so far plus fresh arrays); ``steady_peak``: the same for
    a later run, which reuses the buffers; ``held_bytes``: what the plan's
    buffers hold between runs.
    """

    ops: list[str]
    live_after: list[int]
    peak_bytes: int
    peak_op: int
    at_peak: list[tuple[str, int]]
    resting_bytes: int
    first_run_peak: int = 0
    steady_peak: int = 0
    held_bytes: int = 0
    op_index: list[int] | None = None
    """``op_index[i]``: the block index of the op step i runs (steps run in schedule order)."""


def _sizer(block, feed_shapes: Mapping[str, Sequence[int]]):
    """A function giving each var's bytes, with -1 dims taken from the fed shapes (the batch size)."""
    batch = None
    for name, shape in feed_shapes.items():
        var = block.find_var(name)
        if var is not None and -1 in var.shape:
            batch = int(shape[var.shape.index(-1)])
            break
    fed = {n: tuple(s) for n, s in feed_shapes.items()}

    def size(name: str) -> int:
        var = block.var(name)
        shape = fed.get(name) or tuple(batch if d == -1 and batch is not None else d for d in var.shape)
        if any(d < 0 for d in shape):
            raise ValueError(f"the size of '{name}' {var.type_str()} is unknown: give the feed shapes")
        return int(np.prod(shape, dtype=np.int64)) * np.dtype(var.dtype).itemsize

    return size


def analyze_memory(program, feed_shapes: Mapping[str, Sequence[int]], fetch_list: Sequence = ()) -> MemoryReport:
    """The memory profile of running ``program``'s global block with feeds of ``feed_shapes``."""
    block = program.global_block()
    fetch = [f if isinstance(f, str) else f.name for f in fetch_list]
    plan = build_plan(block, list(feed_shapes), fetch)
    size = _sizer(block, feed_shapes)
    resting = sum(size(n) for n in plan.feeds) + sum(size(n) for n in plan.from_scope)
    live: dict[str, int] = {}
    slotted: set[str] = set()
    slot_bytes: dict[int, int] = {}
    live_after, peak, peak_op, at_peak, first, steady = [], 0, -1, [], 0, 0
    for i, step in enumerate(plan.steps):
        k = plan.buffers.by_step.get(i)
        ks = () if k is None else k if isinstance(k, tuple) else (k,)
        for name in step.outs:
            live[name] = size(name)
        for name, k in zip(step.outs, ks):
            slotted.add(name)
            slot_bytes[k] = max(slot_bytes.get(k, 0), live[name])
        during = sum(live.values())
        fresh = sum(b for n, b in live.items() if n not in slotted)
        first, steady = max(first, fresh + sum(slot_bytes.values())), max(steady, fresh)
        if during > peak:
            peak, peak_op, at_peak = during, i, sorted(live.items(), key=lambda kv: -kv[1])
        for name in step.dead:
            live.pop(name, None)
        live_after.append(sum(live.values()))
    return MemoryReport([block.ops[s.index].type for s in plan.steps], live_after, peak, peak_op, at_peak, resting,
                        first, steady, sum(slot_bytes.values()), [s.index for s in plan.steps])


def memory_text(report: MemoryReport, top: int = 10) -> str:
    """The report as the table ``gradgen run --memory`` prints."""
    lines = [f"resting (feeds and persistable vars read): {format_bytes(report.resting_bytes)}",
             f"plan buffers held between runs: {format_bytes(report.held_bytes)}; allocated at most: "
             f"{format_bytes(report.first_run_peak)} in a first run, {format_bytes(report.steady_peak)} in later runs",
             f"{'step':>6}  {'type':<28} {'live after':>12}"]
    index = report.op_index or list(range(len(report.ops)))
    lines += [f"{f'#{i}':>6}  {f'{t} (op #{k})':<28} {format_bytes(b):>12}"
              for i, (t, k, b) in enumerate(zip(report.ops, index, report.live_after))]
    if report.peak_op >= 0:
        lines.append(f"peak: {format_bytes(report.peak_bytes)} above resting, while step #{report.peak_op} "
                     f"({report.ops[report.peak_op]}) runs; largest vars alive then:")
        lines += [f"  {name:<40} {format_bytes(b)}" for name, b in report.at_peak[:top]]
    return "\n".join(lines) + "\n"
