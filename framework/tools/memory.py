"""What is in memory during a run: bytes live after each op by kind, the peak, who holds it and what keeps it.

The analysis follows the numpy backend's own plan, in block order: an op's
outputs come alive when it runs (every output is a fresh array: the reference
interpreter shares no buffers between ops, so every run allocates the same),
a var dies right after its last use unless it is fetched or persistable, and
persistable outputs stay staged until the run commits.
Feeds and the persistable values read from the scope are the resting state
and are reported apart. -1 dims are sized from the feed shapes. Every var
has a kind (``var_kinds``); the kinds' running totals are kept step by step,
so the whole analysis is linear in the number of ops.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from ..backend.numpy.plan import build_plan, unmade_outputs
from ..backend.numpy.plan_data import PlanOptions
from .summary import batch_size, format_bytes
from .text_table import table_lines
from .var_kinds import KINDS, block_kinds

MADE_KINDS = ("activation", "gradient", "staged update", "temporary")
"""The kinds of arrays a run makes, in the order of ``MemoryReport.kinds_after``."""


@dataclass(frozen=True)
class MemoryReport:
    """``live_after[i]``: bytes of run-made arrays alive after step i (op ``ops[i]``, in block order); the
    peak, what every run allocates at most at once, is during step ``peak_op``."""

    ops: list[str]
    live_after: list[int]
    peak_bytes: int
    peak_op: int
    at_peak: list[tuple[str, int]]
    resting_bytes: int
    op_index: list[int] | None = None
    """``op_index[i]``: the block index of the op step i runs."""
    kinds_after: list[tuple[int, ...]] = field(default_factory=list)
    """``kinds_after[i][k]``: bytes of kind ``MADE_KINDS[k]`` alive after step i."""
    resting_by_kind: dict[str, int] = field(default_factory=dict)
    peak_by_kind: dict[str, int] = field(default_factory=dict)
    """Run-made bytes by kind while the peak step runs."""
    kind: dict[str, str] = field(default_factory=dict)
    """Var name -> its kind (run-made kind for vars an op writes, else resting kind)."""
    made_at: dict[str, int] = field(default_factory=dict)
    """Var name -> the step that writes it."""
    keeper: dict[str, int] = field(default_factory=dict)
    """Var name -> the last step that reads it: what keeps it alive until then."""
    labels: list[str] = field(default_factory=list)
    """What each step runs (its op's type)."""
    fetched: tuple[str, ...] = ()
    unsized: tuple[str, ...] = ()
    """Vars whose size only a run knows and that no measured shape gave: counted as 0 bytes."""
    kinds_during: list[tuple[int, ...]] = field(default_factory=list)
    """``kinds_during[i][k]``: bytes of kind ``MADE_KINDS[k]`` alive while step i runs (its inputs not yet
    dropped, its outputs made): the peak is the largest sum, which a chart of ``kinds_after`` never shows."""


def run_time_sized(block) -> set[str]:
    """Vars of ``block`` whose leading dim is only known once a run has made them: a while loop's history
    (one row per iteration). Feed shapes cannot size these; a measured run can (``measured_run``)."""
    return {n for op in block.ops if op.type == "while" for n in op.output("History")}


def measured_run(exe, program, feed: Mapping[str, np.ndarray], fetch_list: Sequence[str],
                 scope) -> tuple[list, dict[str, tuple]]:
    """One run of ``program`` that also fetches the vars only a run can size (``run_time_sized``): the fetched
    values, and those vars' shapes for ``analyze_memory(measured=...)``."""
    extra = sorted(run_time_sized(program.global_block()) - set(fetch_list))
    values = exe.run(program, feed=feed, fetch_list=list(fetch_list) + extra, scope=scope)
    n = len(fetch_list)
    return values[:n], {name: np.shape(v) for name, v in zip(extra, values[n:])}


def _sizer(block, feed_shapes: Mapping[str, Sequence[int]], measured: Mapping[str, Sequence[int]],
           unsized: list[str], unmade: frozenset[str] = frozenset()):
    """A function giving each var's bytes, with -1 dims taken from the fed shapes (the batch size).

    A var only a run can size (``run_time_sized``) takes its ``measured`` shape; without one it counts
    0 bytes and its name goes to ``unsized``, so the rest of the timeline is still drawn. A var the run
    never makes (``unmade``: a loop's History nothing reads) counts 0 bytes.
    """
    batch = batch_size(block, feed_shapes)
    fed = {n: tuple(s) for n, s in feed_shapes.items()}
    by_run = run_time_sized(block)

    def size(name: str) -> int:
        if name in unmade:
            return 0
        var = block.var(name)
        shape = fed.get(name) or measured.get(name)
        if shape is None and name in by_run:
            if name not in unsized:
                unsized.append(name)
            return 0
        if shape is None:
            shape = tuple(batch if d == -1 and batch is not None else d for d in var.shape)
        if any(d < 0 for d in shape):
            raise ValueError(f"the size of '{name}' {var.type_str()} is unknown: give the feed shapes")
        return int(np.prod(shape, dtype=np.int64)) * np.dtype(var.dtype).itemsize

    return size


def analyze_memory(program, feed_shapes: Mapping[str, Sequence[int]], fetch_list: Sequence = (),
                   options: PlanOptions | None = None,
                   measured: Mapping[str, Sequence[int]] | None = None) -> MemoryReport:
    """The memory profile of running ``program``'s global block with feeds of ``feed_shapes``.

    ``measured`` gives the shapes a run made for vars only a run can size (a while loop's history, whose
    length is the trip count); those without one count nothing and are listed in ``MemoryReport.unsized``.

    One pass over the plan's steps keeps running totals (overall and by kind);
    a second pass up to the peak lists what is alive there.
    """
    block = program.global_block()
    fetch = [f if isinstance(f, str) else f.name for f in fetch_list]
    plan = build_plan(block, list(feed_shapes), fetch, options)
    unsized: list[str] = []
    size = _sizer(block, feed_shapes, measured or {}, unsized, unmade_outputs(plan))
    kinds = block_kinds(block)
    kind = {**kinds.resting, **{n: "feed" for n in plan.feeds}, **kinds.made}
    slot_of = {k: n for n, k in enumerate(MADE_KINDS)}
    resting_by_kind: dict[str, int] = {}
    for name in (*plan.feeds, *plan.from_scope):
        k = "feed" if name in plan.feeds else kinds.resting.get(name, "optimizer state")
        resting_by_kind[k] = resting_by_kind.get(k, 0) + size(name)
    live: dict[str, int] = {}
    by_kind = [0] * len(MADE_KINDS)
    total = 0
    live_after, kinds_after, kinds_during, made_at, keeper = [], [], [], {}, {}
    peak, peak_op, peak_kinds = 0, -1, ()
    for i, step in enumerate(plan.steps):
        for name in step.ins:
            keeper[name] = i
        for name in step.outs:
            made_at[name] = i
            b = size(name)
            old = live.get(name)
            if old is not None:
                total -= old
                by_kind[slot_of[kind[name]]] -= old
            live[name] = b
            total += b
            by_kind[slot_of[kind[name]]] += b
        kinds_during.append(tuple(by_kind))
        if total > peak:
            peak, peak_op, peak_kinds = total, i, kinds_during[-1]
        for name in step.dead:
            b = live.pop(name, None)
            if b is not None:
                total -= b
                by_kind[slot_of[kind[name]]] -= b
        live_after.append(total)
        kinds_after.append(tuple(by_kind))
    at_peak = sorted(_live_during(plan, peak_op, size).items(), key=lambda kv: -kv[1])
    return MemoryReport([block.ops[s.index].type for s in plan.steps], live_after, peak, peak_op, at_peak,
                        sum(resting_by_kind.values()), [s.index for s in plan.steps],
                        kinds_after, resting_by_kind, {k: b for k, b in zip(MADE_KINDS, peak_kinds) if b},
                        kind, made_at, keeper, [block.ops[s.index].type for s in plan.steps], tuple(fetch),
                        tuple(unsized), kinds_during)


def _live_during(plan, at: int, size) -> dict[str, int]:
    """The run-made vars alive while step ``at`` runs (its outputs made, its dying inputs not yet freed)."""
    live: dict[str, int] = {}
    for i, step in enumerate(plan.steps[:at + 1]):
        for name in step.outs:
            live[name] = size(name)
        if i < at:
            for name in step.dead:
                live.pop(name, None)
    return live


def peak_sentence(report: MemoryReport) -> str:
    """The peak in words: how big, during which step, and what share each kind has."""
    if report.peak_op < 0:
        return "the run makes no arrays: everything in memory is the resting state"
    parts = sorted(report.peak_by_kind.items(), key=lambda kv: -kv[1])
    share = ", ".join(f"{100 * b / report.peak_bytes:.0f}% {k} ({format_bytes(b)})" for k, b in parts)
    label = report.labels[report.peak_op] if report.labels else report.ops[report.peak_op]
    return (f"{format_bytes(report.peak_bytes)} above the resting {format_bytes(report.resting_bytes)}, "
            f"while step #{report.peak_op} ({label}) runs; by kind: {share}")


def unsized_sentence(report: MemoryReport) -> str:
    """What the figures leave out: vars only a run can size, which no measured shape gave."""
    return (f"not counted (sized by the run's trip count; `gradgen run --memory` measures them): "
            f"{', '.join(report.unsized)}" if report.unsized else "")


def memory_text(report: MemoryReport, top: int = 10) -> str:
    """The report as ``gradgen run --memory`` prints it: resting state, per-step table, the peak by kind and var."""
    resting = ", ".join(f"{k} {format_bytes(b)}" for k, b in report.resting_by_kind.items())
    lines = [f"resting (feeds and persistable vars read): {format_bytes(report.resting_bytes)}"
             + (f" = {resting}" if resting else ""),
             f"allocated at most, every run: {format_bytes(report.peak_bytes)}", ""]
    if report.unsized:
        lines[-1:-1] = [unsized_sentence(report)]
    index = report.op_index or list(range(len(report.ops)))
    labels = report.labels or report.ops
    kinds_after = report.kinds_after or [()] * len(report.ops)
    rows = [(f"#{i}", f"op #{k}", t, format_bytes(b), *(format_bytes(x) if x else "-" for x in ka))
            for i, (t, k, b, ka) in enumerate(zip(labels, index, report.live_after, kinds_after))]
    header = ("step", "op", "runs", "live after", *(MADE_KINDS if report.kinds_after else ()))
    lines += table_lines(header, rows, right={0, 1} | set(range(3, len(header))))
    if report.peak_op >= 0:
        lines += ["", "peak: " + peak_sentence(report), f"largest vars alive then (of {len(report.at_peak)}):"]
        rows = [(name, report.kind.get(name, "?"), format_bytes(b), _step_ref(report, report.made_at.get(name)),
                 _keeper_text(report, name)) for name, b in report.at_peak[:top]]
        lines += table_lines(("var", "kind", "bytes", "made by", "kept alive by"), rows, right={2}, indent="  ")
    return "\n".join(lines) + "\n"


def _step_ref(report: MemoryReport, step: int | None) -> str:
    if step is None:
        return "-"
    labels = report.labels or report.ops
    return f"step #{step} {labels[step]}"


def _keeper_text(report: MemoryReport, name: str) -> str:
    """The last reader of ``name``, or why nothing frees it (staged until commit, never read)."""
    last = report.keeper.get(name)
    if report.kind.get(name) == "staged update":
        return "the commit at the end of the run"
    if name in report.fetched:
        return "the fetch at the end of the run"
    if last is None or last == report.made_at.get(name):
        return "nothing: no op reads it, freed when its step ends"
    return _step_ref(report, last)


__all__ = ["KINDS", "MADE_KINDS", "MemoryReport", "analyze_memory", "memory_text", "peak_sentence",
           "measured_run", "run_time_sized", "unsized_sentence"]
