"""Reverse mode or forward mode? Both built for one program and compared in numbers.

Reverse mode (``gradients``) gives one row of the Jacobian per pass (a vector-
Jacobian product): a full Jacobian takes one pass per scalar output. Forward
mode (``forward_gradients``) gives one column per pass (a Jacobian-vector
product): one pass per scalar input. Per pass, each mode costs about a small
multiple of the program; reverse mode must keep the forward values its gradient
ops read until the backward part runs, forward mode can drop each tangent right
after its use. ``compare_modes`` measures both on the user's own program.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from gradgen.program import Program
from gradgen.program.dtypes import is_float
from gradgen.program.ops import OP_SCHEMAS

from ..passes.backward import gradients
from ..passes.forward import forward_gradients
from ..runtime.executor import Executor
from ..runtime.scope import Scope
from .memory import analyze_memory, measured_run
from .summary import batch_size, format_bytes, resolve_shape


@dataclass(frozen=True)
class ModeReport:
    """One mode on one program: the ops its pass added, FLOPs and peak live bytes of a whole run (forward part
    included), the measured seconds of one run, and how many runs a full Jacobian needs."""

    mode: str
    ops_emitted: int
    flops_per_pass: int
    peak_bytes: int
    seconds_per_pass: float
    passes: int

    @property
    def jacobian_seconds(self) -> float:
        return self.seconds_per_pass * self.passes


def _shape_of(block, feed_shapes, batch):
    def shape(name: str) -> tuple[int, ...]:
        if name in feed_shapes:
            return tuple(feed_shapes[name])
        resolved = resolve_shape(block.var(name).shape, batch)
        if resolved is None:
            raise ValueError(f"the shape of '{name}' {block.var(name).type_str()} is unknown: give --feed-shape")
        return resolved
    return shape


def _op_flops(op, shape) -> int:
    """Two per multiply-add where the op's schema counts them (products, convolutions); otherwise one per element
    of its largest input or output."""
    multiply_adds = OP_SCHEMAS[op.type].multiply_adds
    if multiply_adds is not None:
        return 2 * multiply_adds(op, shape)
    sizes = [int(np.prod(shape(n))) for n in op.input_arg_names + op.output_arg_names]
    return max(sizes, default=0)


def estimate_flops(program, feed_shapes: Mapping[str, Sequence[int]]) -> int:
    """Floating-point operations of one run of the global block (each sub-block's ops counted once)."""
    block = program.global_block()
    batch = batch_size(block, feed_shapes)
    total = 0
    for sub in program.blocks:
        shape = _shape_of(sub, feed_shapes, batch)
        for op in sub.ops:
            if op.type not in ("cond", "while"):
                try:
                    total += _op_flops(op, shape)
                except ValueError:  # a sub-block var sized only at run time (a loop's history): not counted
                    continue
    return total


def _inputs(block) -> list:
    """Vars a run needs from outside: read before any op writes them, or persistable (kept in the scope)."""
    written: set[str] = set()
    needed: dict[str, None] = {}
    for op in block.ops:
        for n in op.input_arg_names:
            if n not in written or block.var(n).persistable:
                needed[n] = None
        written.update(op.output_arg_names)
    return [block.var(n) for n in needed if block.var(n).block is block]


def _random_inputs(block, feed_shapes, given: Mapping[str, np.ndarray], rng, scope: Scope) -> dict[str, np.ndarray]:
    """A value for every input (``given`` ones, else random; integers zero): persistable ones go into
    ``scope``, the rest are returned as the feed."""
    shape = _shape_of(block, feed_shapes, batch_size(block, feed_shapes))
    feed = {}
    for var in _inputs(block):
        if var.name in given:
            value = np.asarray(given[var.name])
        else:
            s = shape(var.name)
            value = rng.standard_normal(s).astype(var.dtype) if is_float(var.dtype) else np.zeros(s, var.dtype)
        if var.persistable:
            scope.set(var.name, value)
        else:
            feed[var.name] = value
    return feed


def _build(program: Program, mode: str, outputs: Sequence[str], wrt: Sequence[str]):
    """A copy of ``program`` with one derivative pass of ``mode``; returns it and the vars to fetch."""
    copy = Program.from_json(program.to_json())
    block = copy.global_block()
    outs, ins = [block.var(n) for n in outputs], [block.var(n) for n in wrt]
    if mode == "reverse":
        seeds = [block.create_var(f"{y.name}@COTANGENT", y.shape, y.dtype, stop_gradient=True) for y in outs]
        found = gradients(outs, ins, target_gradients=seeds)
    else:
        seeds = [block.create_var(f"{x.name}@DIRECTION", x.shape, x.dtype, stop_gradient=True) for x in ins]
        found = forward_gradients(outs, ins, seeds)
    return copy, [v for v in found if v is not None]


def _elements(program, names, feed_shapes) -> int:
    block = program.global_block()
    shape = _shape_of(block, feed_shapes, batch_size(block, feed_shapes))
    return sum(int(np.prod(shape(n))) for n in names)


def measure_mode(program: Program, mode: str, outputs: Sequence[str], wrt: Sequence[str],
                 feed_shapes: Mapping[str, Sequence[int]], repeats: int = 5, seed: int = 0,
                 values: Mapping[str, np.ndarray] | None = None) -> ModeReport:
    """Build ``mode`` ("reverse" or "forward") for ``program`` and measure it (see ``ModeReport``).

    Inputs get ``values`` where given (a loop count, labels), else random values of ``feed_shapes``."""
    values = dict(values or {})
    feed_shapes = {**feed_shapes, **{n: np.shape(v) for n, v in values.items()}}
    before = sum(len(b.ops) for b in program.blocks)
    built, fetch = _build(program, mode, outputs, wrt)
    block = built.global_block()
    exe, scope = Executor(), Scope()
    feed = _random_inputs(block, feed_shapes, values, np.random.default_rng(seed), scope)
    shapes = {n: a.shape for n, a in feed.items()}
    # Random values make NaNs by design (Adam's second moment below zero, say): only time and memory are
    # measured here, so numpy's warnings about them are noise.
    with np.errstate(all="ignore"):
        # Plans and buffers are made once, not timed; this run also sizes the loop histories for the memory figure.
        _, measured = measured_run(exe, built, feed, fetch, scope)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            exe.run(built, feed=feed, fetch_list=fetch, scope=scope)
            times.append(time.perf_counter() - start)
    passes = _elements(program, outputs if mode == "reverse" else wrt, feed_shapes)
    return ModeReport(mode, sum(len(b.ops) for b in built.blocks) - before, estimate_flops(built, shapes),
                      analyze_memory(built, shapes, fetch, measured=measured).peak_bytes, statistics.median(times), passes)


def compare_modes(program: Program, outputs: Sequence[str], wrt: Sequence[str],
                  feed_shapes: Mapping[str, Sequence[int]], repeats: int = 5,
                  values: Mapping[str, np.ndarray] | None = None) -> list[ModeReport]:
    """[reverse, forward] for the Jacobian of ``outputs`` with respect to ``wrt`` (var names)."""
    return [measure_mode(program, mode, outputs, wrt, feed_shapes, repeats, values=values)
            for mode in ("reverse", "forward")]


def _seconds(s: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale or unit == "us":
            return f"{s / scale:.3g} {unit}"
    return str(s)


def _passes(n: int) -> str:
    return f"{n:,} pass" + ("" if n == 1 else "es")


def modes_text(reports: Sequence[ModeReport]) -> str:
    """The side-by-side table ``gradgen modes`` prints, and which mode wins the full Jacobian."""
    rows = [("ops emitted by the pass", lambda r: str(r.ops_emitted)),
            ("FLOPs per pass (estimated)", lambda r: f"{r.flops_per_pass:,}"),
            ("peak live memory per pass", lambda r: format_bytes(r.peak_bytes)),
            ("time per pass (measured)", lambda r: _seconds(r.seconds_per_pass)),
            ("passes for the full Jacobian", lambda r: f"{r.passes:,}"),
            ("time for the full Jacobian", lambda r: _seconds(r.jacobian_seconds))]
    lines = [f"| {'':<30} | " + " | ".join(f"{r.mode:>14}" for r in reports) + " |",
             f"|{'-' * 32}|" + "|".join("-" * 16 for _ in reports) + "|"]
    lines += [f"| {label:<30} | " + " | ".join(f"{cell(r):>14}" for r in reports) + " |" for label, cell in rows]
    best, other = sorted(reports, key=lambda r: r.jacobian_seconds)[:2]
    lines.append(f"\nwinner for the full Jacobian: {best.mode} mode ({_passes(best.passes)} of "
                 f"{_seconds(best.seconds_per_pass)} against {_passes(other.passes)} of "
                 f"{_seconds(other.seconds_per_pass)})")
    return "\n".join(lines) + "\n"


__all__ = ["ModeReport", "compare_modes", "measure_mode", "modes_text", "estimate_flops"]
