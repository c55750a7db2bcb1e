"""Compiling one block into a ``Plan``: kernels built, names resolved, lifetimes decided.

A plan is plain data the executor's hot loop walks without thinking:
one ``Step`` tuple per op, holding the kernel function (already built by its
factory from the op's attrs), the input names, the output name(s) and the
names of the vars that die right after the step. Planning also decides,
before any op runs, which vars a run needs from outside (feeds and
persistable vars from the scope) and fails clearly when one cannot come
from anywhere.
"""
from __future__ import annotations

from functools import partial
from operator import itemgetter
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import numpy as np

from gradgen.program.describe import describe_var, op_location
from gradgen.program.shapes import format_shape

from .buffers import Buffers, assign_slots, slotted
from ..errors import ExecutionError, FeedError
from .fusion import gemm_update_pairs, sgd_gemm
from .kernels import INTO, KERNELS
from .schedule import schedule


class Step(NamedTuple):
    """What the hot loop needs for one op.

    ``get(env)`` returns the input arrays (the one array when ``nargs`` is 1,
    a tuple when it is more); ``out`` is the output name when there is
    exactly one, else None and ``outs`` names them; ``dead`` are the vars to
    drop right after the step.
    """

    fn: Callable[..., Any]
    get: Callable[[dict], Any] | None
    nargs: int
    out: str | None
    outs: tuple[str, ...]
    dead: tuple[str, ...]
    ins: tuple[str, ...]
    index: int
    """The op's index in its block (steps run in ``schedule`` order, not always block order)."""


class Plan(NamedTuple):
    """A compiled block. ``steps`` run in ``schedule`` order; ``steps[i].index`` is the op's index in the block."""

    block: Any
    steps: tuple[Step, ...]
    feeds: tuple[str, ...]
    """Feed names the run keeps (fed vars no op reads and nobody fetches are dropped)."""
    from_scope: tuple[str, ...]
    """Persistable vars read before any op writes them: loaded from the scope at run start."""
    commits: tuple[str, ...]
    """Persistable vars some op writes: copied into the scope only when the whole run succeeded."""
    fetches: tuple[str, ...]
    buffers: Buffers
    """Arrays the plan owns and reuses across runs (intermediates' slots, spare parameter buffers)."""
    declared: dict[str, tuple]
    """Feeds and scope values the run checks: name -> (numpy dtype, rank, ((axis, size) of each known dim))."""


def run_plan(plan: Plan, env: dict) -> None:
    """Run ``plan``'s steps on ``env`` (name -> array), which holds the feeds and scope values it needs.

    Outputs are stored in ``env`` and intermediates are deleted after their
    last use. A failing kernel raises an ExecutionError that names the op,
    its callsite and its inputs' run-time types.
    """
    i = 0
    try:
        for i, (fn, get, nargs, out, outs, dead, _, _) in enumerate(plan.steps):
            if nargs == 1:
                result = fn(get(env))
            elif nargs:
                result = fn(*get(env))
            else:
                result = fn()
            if out is not None:
                env[out] = result
            else:
                if len(result) != len(outs):
                    raise ValueError(f"the kernel returned {len(result)} outputs for {len(outs)} output vars")
                for n, v in zip(outs, result):
                    env[n] = v
            for n in dead:
                del env[n]
    except Exception as e:
        raise kernel_error(plan, i, env, e) from e


def describe_inputs(block, op, env: Mapping[str, Any]) -> str:
    """``X=x: float64[64, 1000], Y=w: <released>``: an op's inputs as they are in ``env``."""
    parts = []
    for slot, names in op.inputs.items():
        for n in names:
            v = env.get(n)
            got = f"{np.asarray(v).dtype}{format_shape(np.shape(v))}" if v is not None else "<released>"
            parts.append(f"{slot}={n}: {got}")
    return ", ".join(parts) or "no inputs"


def kernel_error(plan: Plan, position: int, env: Mapping[str, Any], e: Exception) -> ExecutionError:
    """The error for a kernel that raised ``e`` at step ``position`` of ``plan``."""
    block = plan.block
    index = plan.steps[position].index
    op = block.ops[index]
    return ExecutionError(f"{op_location(block, index, op.type, op.callsite)} failed: {type(e).__name__}: {e}; "
                          f"inputs: {describe_inputs(block, op, env)}")


def build_kernel(block, index: int, op) -> Callable[..., Any]:
    """The op's kernel function, built by its factory; an ExecutionError if there is none or it refuses."""
    factory = KERNELS.get(op.type)
    where = op_location(block, index, op.type, op.callsite)
    if factory is None:
        raise ExecutionError(f"{where}: no kernel is registered for op type '{op.type}'")
    try:
        return factory(op)
    except Exception as e:  # a factory rejecting attrs: report it where the op is
        raise ExecutionError(f"{where}: cannot build its kernel: {type(e).__name__}: {e}") from e


def _unbuffered(into: Callable[..., Any], *args) -> Any:
    return into(*args, None)


def _into_kernel(op) -> Callable[..., Any] | None:
    """The op's kernel that writes into a given buffer, or None (no such kernel, or it declines these attrs/types)."""
    factory = INTO.get(op.type)
    try:
        return factory(op) if factory is not None else None
    except Exception:  # the plain kernel's factory reports the problem
        return None


def _is_persistable(block, name: str) -> bool:
    var = block.find_var(name)
    return var is not None and var.persistable


def _missing_input(block, index: int, op, name: str, feeds: Sequence[str]) -> FeedError:
    where = op_location(block, index, op.type, op.callsite)
    fed = ", ".join(sorted(feeds)) or "nothing"
    return FeedError(f"{where} needs input {describe_var(block, name)}, which is neither fed nor persistable "
                     f"nor made by an earlier op (fed: {fed})")


def build_plan(block, feed_names: Sequence[str], fetch_names: Sequence[str]) -> Plan:
    """Compile ``block`` for a run fed ``feed_names`` and fetching ``fetch_names``.

    Raises FeedError when a feed names no var or an op input cannot come from
    anywhere, and ExecutionError when a fetched var is never available or an
    op type has no kernel.
    """
    for name in feed_names:
        if block.find_var(name) is None:
            raise FeedError(f"block {block.idx}: feed '{name}' names no var of the program")
    fed = set(feed_names)
    produced: set[str] = set()
    needed_from_scope: dict[str, None] = {}
    needed_feeds: dict[str, None] = {}
    ops = block.ops
    for i, op in enumerate(ops):
        for name in op.input_arg_names:
            if name not in produced:
                if name in fed:
                    needed_feeds[name] = None
                elif _is_persistable(block, name):
                    needed_from_scope[name] = None
                else:
                    raise _missing_input(block, i, op, name, feed_names)
        for name in op.output_arg_names:
            produced.add(name)
    for name in fetch_names:
        if block.find_var(name) is None:
            raise ExecutionError(f"block {block.idx}: fetch '{name}' names no var of the program")
        if name in produced:
            continue
        if name in fed:
            needed_feeds[name] = None
        elif _is_persistable(block, name):
            needed_from_scope[name] = None
        else:
            raise ExecutionError(f"block {block.idx}: cannot fetch {describe_var(block, name)}: no op makes it, "
                                 "it is not fed, and it is not persistable")

    keep = set(fetch_names)
    units = _units(block, ops, schedule(ops), keep)
    dying = _dying(block, units, keep)
    scheduled = [ops[i] for i, *_ in units]
    intos = {at: unit[3] for at, unit in enumerate(units) if unit[3] is not None}
    by_step, swaps, count = assign_slots(block, scheduled, set(intos), dying, keep)
    buffers = Buffers([None] * count, swaps, by_step)
    steps = []
    for at, (i, ins, outs, _) in enumerate(units):
        fn = build_kernel(block, i, ops[i])
        if at in by_step:
            fn = slotted(intos[at], buffers.slots, by_step[at])
        elif len(ins) != len(ops[i].input_arg_names):  # a fused step without a buffer of its own
            fn = partial(_unbuffered, intos[at])
        steps.append(Step(fn, itemgetter(*ins) if ins else None, len(ins), outs[0] if len(outs) == 1 else None,
                          outs, tuple(dying.get(at, ())), ins, i))
    commits = tuple(dict.fromkeys(n for op in ops for n in op.output_arg_names if _is_persistable(block, n)))
    declared = {n: _declared(block.var(n)) for n in (*feed_names, *needed_from_scope)}
    return Plan(block, tuple(steps), tuple(needed_feeds), tuple(needed_from_scope), commits, tuple(fetch_names),
                buffers, declared)


def _units(block, ops, order: Sequence[int], keep: set) -> list[tuple]:
    """The steps to run, in ``order``: (op index, input names, output names, into kernel or None).

    A weight-gradient product fused into the update after it becomes one unit, under the update's index.
    """
    readers: dict[str, int] = {}
    for op in ops:
        for name in op.input_arg_names:
            readers[name] = readers.get(name, 0) + 1
    fused = gemm_update_pairs(block, [ops[i] for i in order], keep, readers)
    units = []
    for at, i in enumerate(order):
        op = ops[i]
        if at in fused:
            prod = ops[order[fused[at]]]
            ins = (prod.input("X")[0], prod.input("Y")[0], op.input("Param")[0], op.input("LearningRate")[0])
            units.append((i, ins, tuple(op.output_arg_names), sgd_gemm(prod)))
        elif at + 1 not in fused:
            units.append((i, tuple(op.input_arg_names), tuple(op.output_arg_names), _into_kernel(op)))
    return units


def _dying(block, units: Sequence[tuple], keep: set) -> dict[int, list[str]]:
    """Position -> the vars last used there that are neither fetched nor persistable."""
    last_use: dict[str, int] = {}
    for at, (_, ins, outs, _) in enumerate(units):
        for name in ins + outs:
            last_use[name] = at
    dying: dict[int, list[str]] = {}
    for name, at in last_use.items():
        if name not in keep and not _is_persistable(block, name):
            dying.setdefault(at, []).append(name)
    return dying


def _declared(var) -> tuple:
    return np.dtype(var.dtype), len(var.shape), tuple((a, d) for a, d in enumerate(var.shape) if d != -1)


def conforms(value: Any, declared: tuple) -> bool:
    """True when ``value`` is an ndarray of exactly the declared dtype and shape (-1 matches any size)."""
    dtype, rank, known = declared
    if type(value) is not np.ndarray or value.dtype != dtype or value.ndim != rank:
        return False
    shape = value.shape
    for a, d in known:
        if shape[a] != d:
            return False
    return True
