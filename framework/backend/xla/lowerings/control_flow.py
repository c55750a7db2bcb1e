"""Lowerings of the control-flow ops: ``cond`` as ``lax.cond`` and ``while`` as ``lax.while_loop``, each computing
what its numpy kernel (``backend/numpy/kernels/control_flow.py``) computes, and ``stash_read``, the xla engine's
own stand-in for a gradient loop's op read back (``loop_stash``).

A sub-block sees the op's ``Input`` vars and its parameters, as the numpy kernels feed it. Checks and History
overflows stated inside a ``lax`` branch or loop body are values of that body, so they leave it as two carried
scalars, the index of the first failed check (-1: none) and an overflow flag, and are stated again outside,
one flag per check, each naming its own op. A loop condition that states nothing is XLA's own loop test, traced
in the while's condition; one that checks is evaluated at the end of each iteration and carried. A body whose
first check is a gather of an outer array at a loop var has that index tested in the loop test too (``_Gate``).

``History`` needs a static length: ``rows`` = the context's ``history_capacity``, capped by ``max_iterations``.
Row ``t`` is written in iteration ``t``; rows past ``Steps`` stay zero. A loop still running after ``rows``
iterations sets the overflow flag (the step re-runs with more rows) unless ``rows`` is ``max_iterations``, where
it fails as numpy does. Only the gradient loops read History (``grad_makers/control_flow.py``: a ``gather`` at a
row below ``Steps``); any other reader could see the padding, so it is refused when the loop is lowered.
A gradient loop reads the forward body's values back from a stash the forward loop keeps beside History
instead of recomputing them, where ``shared/loop_read_back`` proves they are the same values. A value the
loop carries to its next iteration needs no stash row (History's next row holds it), nor does a gather of an
outer array at a loop var (gathered again from History's row, or at ``start + t`` for a var counting up by
one): XLA's loop pays per operation, and a row write is one.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, NamedTuple, Sequence

import jax
import jax.numpy as jnp
from jax import lax

from gradgen.program.describe import op_location

from ....errors import ExecutionError
from ...shared.attrs import op_axis
from ...shared.loop_read_back import forward_read_back, replays_of
from ..context import Check, TraceContext
from ..loop_stash import (Stash, counts_up, gather_at_loop_var, next_start, read_back_block, regather, row_reader,
                          rows_already_kept, stash_read, stashes)
from .indexing import in_bounds

__all__ = ["ALWAYS_STATED", "LOWERINGS", "history_rows"]


def history_rows(ctx: TraceContext, max_iterations: int | None) -> int:
    """The static History length of a loop: the context's capacity, capped by the loop's ``max_iterations``."""
    return ctx.history_capacity if max_iterations is None else min(ctx.history_capacity, max_iterations)


# -- sub-blocks inside lax bodies ------------------------------------------------------------------------------
def _first_failed(flags: Sequence[Any]):
    """The index of the first of ``flags`` that is not all True, or -1 (an int32 scalar)."""
    if not flags:
        return jnp.int32(-1)
    ok = jnp.stack([jnp.all(f) for f in flags])
    return jnp.where(jnp.all(ok), -1, jnp.argmin(ok)).astype(jnp.int32)


def _any(flags: Sequence[Any]):
    return jnp.any(jnp.stack([jnp.any(f) for f in flags])) if flags else jnp.zeros((), bool)


@contextmanager
def _set_apart(ctx: TraceContext) -> Iterator[None]:
    """Inside the ``with``, what a trace states (checks, overflows, History steps) starts empty and stays out of
    ``ctx`` (it is the values of a ``lax`` body); ``ctx`` has its own back after."""
    saved = ctx.checks, ctx.flags, ctx.overflow, ctx.steps_of, ctx.where
    ctx.checks, ctx.flags, ctx.overflow, ctx.steps_of = [], [], [], {}
    try:
        yield
    finally:
        ctx.checks, ctx.flags, ctx.overflow, ctx.steps_of, ctx.where = saved


def _traced_apart(ctx: TraceContext, block, env: dict, fetches: Sequence[str], checked_before: int = 0
                  ) -> tuple[list, list[Check], Any, Any]:
    """Trace ``block`` for a ``lax`` body: (fetched values, its checks, first failed index, overflow flag).

    The checks and overflows it states stay out of ``ctx`` (they are the body's values); History steps of loops
    nested inside are dropped (only block 0's loops can be fetched). The first ``checked_before`` checks are left
    out (the loop checks them before the iteration: ``_Gate``).
    """
    with _set_apart(ctx):
        values = ctx.trace_block(block, env, fetches)
        checks, flags = ctx.checks[checked_before:], ctx.flags[checked_before:]
        return values, checks, _first_failed(flags), _any(ctx.overflow)


class _Abstract(NamedTuple):
    """What tracing a block states, found without adding it to the program (``_traced_abstractly``)."""

    checks: list[Check]
    overflows: int
    effects: bool
    """Whether it has side effects (a random draw's host callback)."""
    values: list
    """The fetched values' shapes and dtypes."""


def _traced_abstractly(ctx: TraceContext, block, outer: dict, params: Sequence[str], xs: tuple,
                       fetches: Sequence[str]) -> _Abstract:
    """Trace ``block`` (fed ``xs`` as ``params``) to learn what it states and makes, abstractly: nothing of it
    lands in the program, where a random draw's callback would run once more."""
    found: list = []

    def trace(xs):
        with _set_apart(ctx):
            values = ctx.trace_block(block, {**outer, **dict(zip(params, xs))}, fetches)
            found[:] = [list(ctx.checks), len(ctx.overflow)]
            return values

    jaxpr, values = jax.make_jaxpr(trace, return_shape=True)(xs)
    return _Abstract(found[0], found[1], bool(jaxpr.effects), list(values))


def _restate(ctx: TraceContext, checks: Sequence[Check], failed, ran=True) -> None:
    """State a body's ``checks`` in ``ctx``: check ``k`` failed when ``ran`` and ``failed == k``."""
    for k, check in enumerate(checks):
        ctx.checks.append(check)
        ctx.flags.append(jnp.logical_not(jnp.logical_and(ran, failed == k)))


def _truth(value, what: str):
    """A one-element value as a bool scalar (numpy's ``_truth``: any nonzero is True)."""
    if jnp.size(value) != 1:
        raise ValueError(f"{what} must hold exactly one bool, got shape {list(jnp.shape(value))}")
    return jnp.reshape(value, ()).astype(bool)


def _merge_failed(first, *later):
    """The first failed index of a run: ``first`` unless it is -1, else the first of ``later`` that is not (a
    None among ``later``: a part without checks, which cannot fail)."""
    parts = [f for f in (first, *later) if f is not None]
    result = parts[-1]  # (a failed index is -1 or a check's index)
    for f in reversed(parts[:-1]):
        result = jnp.where(f >= 0, f, result)
    return result


# -- cond ------------------------------------------------------------------------------------------------------
def _cond(op, ctx: TraceContext) -> Callable:
    inputs = op.input("Input")
    single = len(op.output("Out")) == 1
    branches = [(ctx.sub_block(op, f"{key}_block"), op.attr(f"{key}_outs")) for key in ("true", "false")]
    found: dict[int, list[Check]] = {}

    def branch(k: int):
        block, outs = branches[k]

        def run(values):
            got, checks, failed, overflow = _traced_apart(ctx, block, dict(zip(inputs, values)), outs)
            found[k] = checks
            return tuple(got), failed, overflow

        return run

    def fn(pred, *values):
        taken = _truth(pred, "Cond")
        try:
            outs, failed, overflow = lax.cond(taken, branch(0), branch(1), tuple(values))
        except TypeError as e:  # lax.cond wants one type per output
            raise ExecutionError(f"{ctx.where}: the xla backend needs both branches of a cond to make each output "
                                 f"with one dtype and shape ({e})") from e
        _restate(ctx, found[0], failed, taken)
        _restate(ctx, found[1], failed, jnp.logical_not(taken))
        ctx.overflow.append(overflow)
        return outs[0] if single else outs

    return fn


# -- while -----------------------------------------------------------------------------------------------------
def _while(op, ctx: TraceContext) -> Callable:
    n, inputs = len(op.input("X")), op.input("Input")
    cond_block, body_block = ctx.sub_block(op, "cond_block"), ctx.sub_block(op, "body_block")
    cond_params, cond_out = op.attr("cond_params"), op.attr("cond_out")
    body_params, body_outs = op.attr("body_params"), op.attr("body_outs")
    limit = op.attr("max_iterations")
    rows = history_rows(ctx, limit)
    _refuse_padding_readers(op, rows)
    kept = list(dict.fromkeys(name for _, plan in replays_of(op) for name in plan.names)) if rows else []
    carried, regathered = rows_already_kept(op, body_block, kept)
    counting = {k for _, _, k in regathered.values() if counts_up(op, body_block, k)}
    stored = [name for name in kept if name not in carried and name not in regathered]
    reads = forward_read_back(op)
    body_checks: list[Check] = []
    test_checks: list[Check] = []

    def fn(*values):
        xs, outer = tuple(values[:n]), dict(zip(inputs, values[n:]))
        body = _body_reading_back(ctx, reads, body_block, values[0], outer)

        def test_apart(xs):
            (going,), checks, failed, overflow = _traced_apart(ctx, cond_block, {**outer, **dict(zip(cond_params, xs))},
                                                               [cond_out])
            test_checks[:] = checks
            return _truth(going, "the loop condition"), failed, overflow

        # A condition that checks nothing and has no side effect is evaluated by XLA's own loop test, at the start
        # of each iteration (one step less per iteration than carrying its value from the end of the last).
        test = _traced_abstractly(ctx, cond_block, outer, cond_params, xs, [cond_out])
        test_first = not test.checks and not test.overflows and not test.effects
        # (max_iterations=0: the body never runs; it is traced in the loop all the same)
        traced = _traced_abstractly(ctx, body(xs[0]), outer, body_params, xs, body_outs + stored) if rows else None
        gate = _gate(op, body(xs[0]), outer, traced.checks) if rows else None
        checked_before = 1 if gate else 0

        def loop_test(state):
            steps, xs, _, _, going, failed, _ = state
            if test_first:
                going = test_apart(xs)[0]
            going = going & gate.passes(xs) if gate else going
            return going & (steps < rows) & (failed < 0)

        def loop_body(state):
            steps, xs, history, stash, going, failed, overflow = state
            if rows:  # (max_iterations=0: the body is traced but never runs, and has no row to write)
                history = tuple(lax.dynamic_update_index_in_dim(h, x, steps, 0) for h, x in zip(history, xs))
            got, checks, body_failed, body_overflow = _traced_apart(
                ctx, body(xs[0]), {**outer, **dict(zip(body_params, xs))}, body_outs + stored, checked_before)
            body_checks[:] = checks
            new = tuple(_same_type(k, x, v) for k, (x, v) in enumerate(zip(xs, got[:n])))
            stash = tuple(lax.dynamic_update_index_in_dim(s, v, steps, 0) for s, v in zip(stash, got[n:]))
            if test_first:  # (the test states nothing: XLA's loop test evaluates it)
                test_failed, test_overflow = None, _any([])
            else:
                going, test_failed, test_overflow = test_apart(new)
            failed = _merge_failed(failed, body_failed if checks else None,  # (no checks: the loop carries -1)
                                   jnp.where(test_failed >= 0, test_failed + len(checks), -1) if test_checks else None)
            return steps + 1, new, history, stash, going, failed, overflow | body_overflow | test_overflow

        (going,) = ctx.trace_inline(cond_block, {**outer, **dict(zip(cond_params, xs))}, [cond_out])
        history = tuple(_rows_like(rows, x) for x in xs)
        stash = tuple(_rows_like(rows, v) for v in traced.values[n:]) if rows else ()
        state = (jnp.int64(0), xs, history, stash, _truth(going, "the loop condition"), jnp.int32(-1),
                 jnp.zeros((), bool))
        start = xs
        steps, xs, history, stash, going, failed, overflow = lax.while_loop(loop_test, loop_body, state)
        if test_first:
            going = test_apart(xs)[0]
        _restate(ctx, body_checks, failed)
        _restate(ctx, test_checks, failed - len(body_checks))
        still_running = going & (failed < 0)
        if gate:  # the loop stopped before an iteration whose gather would fail: that is the run's failure
            passes = gate.passes(xs)
            ctx.checks.append(gate.check)
            ctx.flags.append(jnp.logical_not(still_running & (steps < rows) & jnp.logical_not(passes)))
            still_running = still_running & (passes | (steps >= rows))
        if limit is not None and rows >= limit:
            ctx.check(jnp.logical_not(still_running),
                      f"the loop is still running after max_iterations={limit} iterations")
        else:
            ctx.overflow.append(still_running)
        ctx.overflow.append(overflow)
        for name in op.output("History"):
            ctx.steps_of[name] = steps
        if kept:
            rows_of = {name: row_reader(buffer) for name, buffer in zip(stored, stash)}
            rows_of.update((name, next_start(history[k], xs[k], steps)) for name, k in carried.items())
            rows_of.update((name, regather(body_block.ops[j], outer[x_name], history[k], start[k] if k in counting
                                            else None)) for name, (j, x_name, k) in regathered.items())
            stashes(ctx)[tuple(op.output("History"))] = Stash(rows_of, steps, outer)
        return (*xs, *history, steps)

    return fn


@dataclass
class _Gate:
    """A loop body whose first check is a ``gather`` of an outer array at a loop var: the loop tests that index
    before each iteration, in XLA's loop test, and stops short of an iteration whose gather would fail, which
    is then the run's failure with the gather's own check. The same failure numpy raises, one operation less per
    iteration (carrying the check's outcome is one where XLA's loop pays per operation)."""

    var: int
    size: int
    check: Check

    def passes(self, xs):
        return in_bounds(xs[self.var], self.size)


def _gate(op, body, outer: dict, checks: Sequence[Check]) -> _Gate | None:
    """The body's ``_Gate``, if its first check (of ``checks``, those it states) is such a gather's."""
    if not checks:
        return None
    for j, o in enumerate(body.ops):
        if op_location(body, j, o.type, o.callsite) == checks[0].where:
            at = gather_at_loop_var(op, body, o)
            return None if at is None else _Gate(at[1], jnp.shape(outer[at[0]])[op_axis(o)], checks[0])
    return None


def _rows_like(rows: int, value):
    """A zero buffer of ``rows`` rows shaped like ``value``: one row per iteration."""
    return jnp.zeros((rows,) + tuple(jnp.shape(value)), jnp.result_type(value))


def _body_reading_back(ctx: TraceContext, reads, body_block, counter, outer: dict) -> Callable:
    """``body(counter) -> block`` to trace for an iteration: ``body_block``, its replayed ops reading the forward
    loop's stash at ``counter - 1`` when that loop was traced with one, started this loop's counter at its Steps,
    and gave both loops the same outer values."""
    stash = stashes(ctx).get(tuple(reads[0].output("History"))) if reads else None
    if stash is None or counter is not stash.steps or not all(
            n in stash.outer and outer.get(n) is stash.outer[n] for n in reads[1].outer):
        return lambda counter: body_block
    plan = reads[1]

    def body(counter):
        index = counter - 1
        values = {n: stash.rows[n](index) for n in plan.names}
        values.update((body_block.ops[j].output("Out")[0], lax.dynamic_index_in_dim(outer[history], index, 0, False))
                      for j, history in plan.rows)
        return read_back_block(body_block, plan, values)

    return body


def _same_type(k: int, x, new):
    """Loop var ``k``'s next value, which must keep its dtype and shape (numpy checks the shape every
    iteration; here shapes are static, so a change is refused while tracing)."""
    if jnp.shape(new) != jnp.shape(x) or jnp.result_type(new) != jnp.result_type(x):
        raise ValueError(f"loop var {k} changes from {jnp.result_type(x)}{list(jnp.shape(x))} to "
                         f"{jnp.result_type(new)}{list(jnp.shape(new))} in an iteration (loop vars keep their type)")
    return new


# -- who may read a padded History -----------------------------------------------------------------------------
_PASS_THROUGH = ("while", "cond", "call", "custom_gradient")
"""Ops that hand an Input var to their sub-blocks, whose own ops are checked in turn."""

_SHAPE_ONLY = ("fill_zeros_like", "gather_grad")
"""Ops that read History only for its shape: their padding rows are zeros and read as History's are."""


def _refuse_padding_readers(op, rows: int) -> None:
    """Raise unless every reader of ``op``'s History vars is one that cannot see its padding rows.

    A gradient loop reads row ``counter - 1`` with ``gather``, its counter counting down from a loop's
    ``Steps``: always a real row. Any other reader (a ``reduce_sum``, a ``gather`` at a row of one's own
    choosing) would see the zero rows past ``Steps`` the numpy backend does not have.
    """
    history = set(op.output("History"))
    program = op.block.program
    for block in program.blocks:
        for index, reader in enumerate(block.ops):
            read = history.intersection(reader.input_arg_names)
            if not read or _reads_real_rows(program, block, reader, read):
                continue
            raise ExecutionError(
                f"{op_location(block, index, reader.type, reader.callsite)} reads the History of a while loop "
                f"({', '.join(sorted(read))}), which the xla backend pads to {rows} rows past the loop's Steps; only "
                f"a gradient loop's gather reads it exactly: run this program on the numpy backend")


def _reads_real_rows(program, block, reader, read: set) -> bool:
    if reader.type in _PASS_THROUGH:
        return read.isdisjoint(n for slot, names in reader.inputs.items() if slot != "Input" for n in names)
    if reader.type in _SHAPE_ONLY:
        return read.issubset(reader.input("X"))
    if reader.type == "gather":
        return read.issubset(reader.input("X")) and reader.attr("axis") == 0 and _in_gradient_loop(program, block)
    return False


def _in_gradient_loop(program, block) -> bool:
    """True when ``block`` is the body of a ``while`` whose counter (first loop var) starts at a loop's Steps."""
    steps = {n for b in program.blocks for o in b.ops if o.type == "while" for n in o.output("Steps")}
    for b in program.blocks:
        for o in b.ops:
            if (o.type == "while" and o.attr("body_block") == block.idx and o.input("X")[:1]
                    and o.input("X")[0] in steps):
                return True
    return False


LOWERINGS = {"cond": _cond, "while": _while, "stash_read": stash_read}

ALWAYS_STATED = frozenset({"while"})
"""Op types whose lowering states an overflow or a check in every trace (a loop: still running when its History
rows ran out, or its ``max_iterations`` check; ``_while``), so a block holding one has run-time checks whatever
its values: ``compile.CompiledBlock`` lowers it once, without donation, where it would lower with donation, find
the checks, and lower again (the anchors' RNN: 0.10 s of a 1.2 s preparation, beside the runs)."""
