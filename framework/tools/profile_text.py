"""The printed profile (``gradgen run --profile``): a ``Profile`` as tables by op type, by step and outside the ops.

Times are means per run: a total over the counted runs divided by their
number. Means add up (the rows of a table sum to the run), medians would not.
"""
from __future__ import annotations

from collections import defaultdict

from gradgen.program import Program

from ..runtime.profile import PHASES, Profile, ProfileRow
from .text_table import table_lines

__all__ = ["profile_text", "step_label"]


def step_label(program: Program, row: ProfileRow) -> str:
    """``block 0, op #3 (matmul), created at model.py:12``, or for a joint kernel's step its kind and both its ops."""
    if len(row.ops) == 1:
        return row.where
    block = program.block(row.block)
    ops = ", ".join(f"#{i} {block.ops[i].type}" for i in row.ops)
    return f"{row.kind} of {len(row.ops)} ops in block {row.block}: {ops} (last: {row.where})"


def _ms(seconds: float, runs: int) -> str:
    return f"{seconds / runs * 1e3:.3f}"


def _percent(seconds: float, whole: float) -> str:
    return f"{100 * seconds / whole:.1f}" if whole > 0 else "-"


def _shown(rows: tuple[ProfileRow, ...], top: int | None) -> tuple[list[ProfileRow], list[ProfileRow]]:
    """(rows to show, in order, block-0 rows left out): the ``top`` slowest block-0 steps with their nested rows."""
    outer = [r for r in rows if r.depth == 0]
    if top is None or len(outer) <= top:
        return list(rows), []
    keep = {id(r) for r in sorted(outer, key=lambda r: -r.seconds)[:top]}
    shown, showing = [], False
    for r in rows:
        if r.depth == 0:
            showing = id(r) in keep
        if showing:
            shown.append(r)
    return shown, [r for r in outer if id(r) not in keep]


def profile_text(program: Program, profile: Profile, top: int | None = None) -> str:
    """The tables of ``profile`` (of ``program``); ``top`` limits the by-step table to the slowest block-0 steps
    (and the steps nested in them)."""
    runs = profile.runs
    if runs == 0:
        return f"profile: no completed runs ({profile.failed_runs} failed)\n"
    whole = profile.seconds  # what the tables share out
    failed = f"; {profile.failed_runs} failed runs not counted" if profile.failed_runs else ""
    lines = [f"profile: {runs} runs, {_ms(whole, runs)} ms a run (times are means per run: totals / runs){failed}",
             f"plans built: {profile.plans_built} ({profile.plan_build_seconds * 1e3:.1f} ms, in 'plan lookup')"]
    if profile.backend_choice is not None:
        lines.append("backend: auto chose {} ({})".format(*profile.backend_choice))
    if profile.threads:
        counts = ", ".join(f"{n} on {t}" for t, n in profile.threads)
        lines.append(f"threads: runs by the engine's pool count: {counts} (Executor(threads=N), or the cores other "
                     "work leaves free)")
    if profile.rows:
        lines += _op_tables(program, profile, top, whole)
    else:
        lines += ["", "no op rows: a compiled backend (xla) runs the block as one program (its 'run loop' row "
                      "below); `gradgen show PROGRAM --backend NAME` prints what it was compiled to"]
    lines += ["", "outside the ops"]
    table = [[_ms(profile.outside[p], runs), _percent(profile.outside[p], whole), what] for p, what in PHASES.items()]
    lines += table_lines(["ms/run", "% of run", "phase"], table, right=[0, 1], indent="  ")
    return "\n".join(lines) + "\n"


def _op_tables(program: Program, profile: Profile, top: int | None, whole: float) -> list[str]:
    """The by-op-type and by-step tables of a profile with step rows."""
    runs = profile.runs
    # an engine column only where rows of several engines meet (backend="auto": the trial's numpy runs and torch's)
    several = len({r.engine for r in profile.rows}) > 1
    engine, column = ((lambda r: (r.engine,)), ["engine"]) if several else ((lambda r: ()), [])
    lines = ["", "by op type (own time: what nested steps take is theirs)"]
    by_type: dict[tuple[str, ...], list[float]] = defaultdict(lambda: [0.0, 0])
    for r in profile.rows:
        totals = by_type[(*engine(r), r.kind)]
        totals[0] += r.own_seconds
        totals[1] += r.calls
    table = [[_ms(s, runs), _percent(s, whole), f"{c / runs:.3g}", *key]
             for key, (s, c) in sorted(by_type.items(), key=lambda kv: -kv[1][0])]
    lines += table_lines(["ms/run", "% of run", "calls/run", *column, "op type"], table, right=[0, 1, 2],
                         indent="  ")

    shown, left_out = _shown(profile.rows, top)
    lines += ["", "by step, in block order (a control-flow op's ms/run includes the steps nested under it)"]
    table = [[_ms(r.seconds, runs), _ms(r.own_seconds, runs), _percent(r.own_seconds, whole), f"{r.calls / runs:.3g}",
              *engine(r), "  " * r.depth + step_label(program, r)] for r in shown]
    if left_out:
        rest = sum(r.seconds for r in left_out)
        table.append([_ms(rest, runs), "", _percent(rest, whole), "", *[""] * len(column),
                      f"({len(left_out)} faster steps not shown)"])
    lines += table_lines(["ms/run", "own ms/run", "% of run", "calls/run", *column, "step"], table,
                         right=[0, 1, 2, 3], indent="  ")
    return lines
