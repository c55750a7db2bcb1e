"""Plan-time fusion of elementwise chains into one generated loop per group (numba, ``gradgen[fast]``).

Walking the units in run order, consecutive single-op units whose ops are in
``elementwise_exprs.EXPRESSIONS`` and whose outputs all have the group's
declared shape join one group; a reduction over every axis may end it (the
loss). Inputs from outside the group may have the group's shape, broadcast
to it (numpy's right-aligned rules, with declared size-1 dims), or be single
numbers (a learning rate). Every var in a group has one float dtype.
An optimizer update (``sgd``, ``momentum``) is a group of its own.

A group becomes one ``Unit`` whose kernel is a generated numba function: one
pass over the elements, each input read once, intermediates kept in
registers. Its outputs are only the vars someone needs after the group
(read later, fetched, or persistable); the others never exist. With one
output the kernel takes ``out``, so the plan's buffers, in-place updates and
atomic commit apply as to any other step. Before the loop, the kernel checks
the run-time shapes (a -1 dim may broadcast at run time); when they are not
those the loop was generated for, it runs the group's ops one by one with
their ordinary kernels instead: never a wrong answer, only a slower one.

``fused_groups(plan)`` lists the groups and their ops, for ``gradgen show --plan``.
"""
from __future__ import annotations

from functools import partial
from operator import itemgetter
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from . import jit
from .compile_queue import Budget, LazyKernel
from .elementwise_exprs import EXPRESSIONS, REDUCTIONS, UPDATES, full_reduction
from .kernels import KernelFactory, takes_out, with_out
from .plan_data import Step, Unit
from .run import InnerOpFailed, StepFailed, run_steps

__all__ = ["element_index", "fuse_elementwise", "group_source", "input_kind", "needed_outputs", "op_by_op",
           "readers_of", "replace_stretches"]

_FLOATS = ("float32", "float64")


def _shape(block, name: str) -> tuple:
    return tuple(block.var(name).shape)


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


class _Group:
    """A group being collected: its shape and dtype, units, and what each outside input is."""

    def __init__(self, shape: tuple, dtype: str):
        self.shape, self.dtype = shape, dtype
        self.units: list[Unit] = []
        self.made: set[str] = set()
        self.inputs: dict[str, str] = {}  # outside input -> kind
        self.reduced = False

    def admit(self, block, op, unit: Unit) -> bool:
        """Add ``unit`` when it fits the group; say whether it did."""
        if self.reduced:
            return False
        reduction = op.type in REDUCTIONS
        kinds = {}
        for name in unit.ins:
            var = block.var(name)
            if var.dtype != self.dtype:
                return False
            if name not in self.made:
                kind = input_kind(tuple(var.shape), self.shape)
                if kind is None or (reduction and kind != "full"):
                    return False
                kinds[name] = kind
        if reduction:
            if not full_reduction(op, len(self.shape)) or block.var(unit.outs[0]).dtype != self.dtype:
                return False
        elif any(_shape(block, n) != self.shape or block.var(n).dtype != self.dtype for n in unit.outs):
            return False
        self.inputs.update(kinds)
        self.units.append(unit)
        self.made.update(unit.outs)
        self.reduced = reduction
        return True


def _starts_group(block, op, unit: Unit) -> _Group | None:
    if len(unit.ops) != 1 or unit.kernel is not None or op.type not in EXPRESSIONS or len(unit.outs) == 0:
        return None
    shape, dtype = _shape(block, unit.outs[0]), block.var(unit.outs[0]).dtype
    if dtype not in _FLOATS or len(shape) == 0:
        return None
    group = _Group(shape, dtype)
    return group if group.admit(block, op, unit) else None


def fuse_elementwise(block, units: Sequence[Unit], keep: set, kernels: Mapping[str, KernelFactory],
                     warm_runs: int = 0, background: bool = True) -> list[Unit]:
    """``units`` with every fusable chain replaced by one unit running a generated kernel.

    ``keep`` are the fetched vars; ``kernels`` the table the fallback (run-time shapes other than the loop's)
    builds the group's ops' ordinary kernels from; ``warm_runs``, how many runs go op by op before a group's
    loop is compiled (on the compile worker, ``compile_queue``; with ``background`` False the run that asks
    waits for it). Without numba, ``units`` unchanged.
    """
    if not jit.AVAILABLE:
        return list(units)
    budget = Budget()

    def group_at(at: int, readers: Mapping[str, list[int]]) -> tuple[Unit | None, int]:
        unit = units[at]
        op = block.ops[unit.index]
        group = _starts_group(block, op, unit)
        if group is None:
            return None, at + 1
        end = at + 1
        if op.type not in UPDATES:
            while end < len(units):
                nxt = units[end]
                nop = block.ops[nxt.index]
                if (len(nxt.ops) != 1 or nxt.kernel is not None or nop.type in UPDATES
                        or (nop.type not in EXPRESSIONS and nop.type not in REDUCTIONS)
                        or not group.admit(block, nop, nxt)):
                    break
                end += 1
        outs = needed_outputs(block, group.units, end, readers, keep)
        if (len(group.units) == 1 and op.type not in UPDATES) or not outs or "full" not in group.inputs.values():
            return None, at + 1
        return _fused_unit(block, group, outs, kernels, warm_runs, background, budget), end

    return replace_stretches(units, group_at)


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


def group_source(block, group: _Group, ins: Sequence[str], outs: Sequence[str]) -> str:
    """The numba module text of a group: ``kernel(*inputs, *full_outputs)`` returning the reduction (or 0)."""
    rank, shape = len(group.shape), group.shape
    args = {name: f"a{k}" for k, name in enumerate(ins)}
    full_outs = [n for n in outs if _shape(block, n) == shape]
    out_args = {name: f"o{k}" for k, name in enumerate(full_outs)}
    ref = out_args[full_outs[0]] if full_outs else next(args[n] for n in ins if group.inputs[n] == "full")
    lines = [f"def kernel({', '.join([*args.values(), *out_args.values()])}):"]
    for name, kind in group.inputs.items():
        if kind == "one":
            lines.append(f"    {args[name]}_ = {args[name]}.ravel()[0]")
    lines.append("    acc = 0.0")  # a loss is accumulated in float64 whatever the group's dtype
    indent = "    "
    for d in range(rank):
        lines.append(f"{indent}for i{d} in range({ref}.shape[{d}]):")
        indent += "    "
    local: dict[str, str] = {}

    def reader(op):
        def read(slot: str) -> str:
            name = op.input(slot)[0]
            if name in local:
                return local[name]
            kind = group.inputs[name]
            if kind == "one":
                return f"{args[name]}_"
            return args[name] + element_index(kind, _shape(block, name), shape)
        return read

    count = 0
    for unit in group.units:
        op = block.ops[unit.index]
        if op.type in REDUCTIONS:
            lines.append(f"{indent}acc += {reader(op)('X')}")
            continue
        for slot, expr in EXPRESSIONS[op.type](op, reader(op)).items():
            name = op.output(slot)[0]
            lines.append(f"{indent}v{count} = {expr}")
            local[name] = f"v{count}"
            count += 1
            if name in out_args:
                lines.append(f"{indent}{out_args[name]}[{', '.join(f'i{d}' for d in range(rank))}] = v{count - 1}")
    lines.append("    return acc")
    return jit.module_head(group.dtype) + "\n".join(lines) + "\n"


def element_index(kind: str, declared: tuple, group: tuple) -> str:
    """The index text reading one element of an input of ``kind`` and declared shape inside a loop over ``group``'s
    shape (loop variables ``i0, i1, ...``): a declared size-1 dim that broadcasts reads index 0."""
    rank = len(group)
    if kind == "full":
        return "[" + ", ".join(f"i{d}" for d in range(rank)) + "]"
    lead = rank - len(declared)
    return "[" + ", ".join("0" if d == 1 and group[lead + j] != 1 else f"i{lead + j}"
                           for j, d in enumerate(declared)) + "]"


def _fused_unit(block, group: _Group, outs: list[str], kernels, warm_runs: int, background: bool,
                budget: Budget) -> Unit:
    ins = tuple(group.inputs)
    source = partial(group_source, block, group, ins, outs)  # written only if compiled
    ops = tuple(u.index for u in group.units)
    fallback = op_by_op(block, group.units, ins, outs, kernels)
    return Unit(index=group.units[-1].index, ops=ops, ins=ins, outs=tuple(outs),
                kernel=_runner(block, group, ins, outs, source, fallback, warm_runs, background, budget))


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
        alone = steps[0].fn  # an update fused alone: its own kernel, writing into the plan's buffers
        return lambda *arrays, out=None: alone(*arrays, out=out)

    def run(*arrays, out=None):
        env = dict(zip(ins, arrays))
        del arrays
        try:
            run_steps(steps, env)  # the plan's own loop: until a group's loop is compiled, this is its every call
        except StepFailed as failed:  # name the op that failed, with its inputs, as an unfused run would
            step = steps[failed.position]
            raise InnerOpFailed(step.index, {n: env.get(n) for n in step.ins}, failed.error) from failed.error
        values = tuple(env[n] for n in outs)
        return values[0] if len(values) == 1 else values

    return run


def _runner(block, group: _Group, ins: Sequence[str], outs: Sequence[str], source: Callable[[], str], fallback,
            warm_runs: int, background: bool, budget: Budget) -> Callable[..., Any]:
    """The step function: check the run-time shapes, take or allocate the output arrays, run the loop.

    The first ``warm_runs`` calls run the ops one by one; the next one asks the compile worker for the loop
    (compiled, or read from the disk cache) and the ops run one by one until it is ready, so no run waits for
    a compiler."""
    state = [warm_runs]  # calls left before asking for the loop; -1 once asked (or refused by the budget)
    types = ", ".join(f"#{u.index} {block.ops[u.index].type}" for u in group.units)
    lazy = LazyKernel(source, f"block {block.idx}: fused group {types}", background)
    shape, dtype = group.shape, np.dtype(group.dtype)
    rank = len(shape)
    full = [k for k, n in enumerate(outs) if _shape(block, n) == shape]
    reduced = [k for k, n in enumerate(outs) if k not in full]
    reduced_shape = _shape(block, outs[reduced[0]]) if reduced else ()
    ref = next(k for k, n in enumerate(ins) if group.inputs[n] == "full") if any(
        kind == "full" for kind in group.inputs.values()) else None
    checks = [(k, group.inputs[n], _shape(block, n)) for k, n in enumerate(ins)]

    def shapes_fit(arrays) -> tuple | None:
        run_shape = arrays[ref].shape if ref is not None else shape
        if len(run_shape) != rank:
            return None
        for k, kind, declared in checks:
            a = arrays[k]
            if a.dtype != dtype:
                return None
            if kind == "full" and a.shape != run_shape:
                return None
            if kind == "one" and a.size != 1:
                return None
            if kind == "bcast":
                lead = rank - len(declared)
                if a.ndim != len(declared) or any(s != 1 and s != run_shape[lead + j] for j, s in enumerate(a.shape)):
                    return None
                if any(s == 1 and d != 1 for s, d in zip(a.shape, declared)):
                    return None  # a -1 dim that is 1 at run time: the loop would index past it
        return run_shape

    many = len(outs) > 1

    scalars = [k for k, n in enumerate(ins) if group.inputs[n] == "one"]

    def run(*arrays, out=None):
        kernel = lazy.kernel
        if kernel is None:
            if lazy.pending is not None:
                kernel = lazy.poll()
            if kernel is None and state[0] != 0:  # warm runs, or decided (compiling, or not compiled)
                state[0] -= state[0] > 0
                return fallback(*arrays, out=out)
        for k in scalars:  # a kernel may hand over a numpy scalar for a one-number var
            if type(arrays[k]) is not np.ndarray:
                arrays = (*arrays[:k], np.asarray(arrays[k]), *arrays[k + 1:])
        run_shape = shapes_fit(arrays)
        if run_shape is None or ref is None and any(d < 0 for d in shape):
            return fallback(*arrays, out=out)
        bufs = out if many else (out,)
        results = []
        for k in full:
            buf = bufs[k] if bufs is not None and k < len(bufs) else None
            if buf is None or buf.shape != run_shape or buf.dtype != dtype or not buf.flags.c_contiguous:
                buf = np.empty(run_shape, dtype)
            results.append(buf)
        if kernel is None:  # the first run after the warm ones asks the compile worker for the loop
            state[0] = -1
            if budget.take(len(group.units)):
                lazy.start((*arrays, *results))
            kernel = lazy.kernel
            if kernel is None:
                return fallback(*arrays, out=out)
        try:
            acc = kernel(*arrays, *results)
        except TypeError:  # argument types the loop was not compiled for
            return fallback(*arrays, out=out)
        values = dict(zip(full, results))
        for k in reduced:
            op = block.ops[group.units[-1].index]
            size = int(np.prod(run_shape))
            total = (acc / size if size else np.nan) if op.type == "reduce_mean" else acc  # numpy: mean of nothing
            values[k] = np.full(reduced_shape, total, dtype)
        ordered = tuple(values[k] for k in range(len(outs)))
        return ordered if many else ordered[0]

    run.fused_ops = tuple(u.index for u in group.units)  # what ``gradgen show --plan`` reports
    run.lazy = lazy  # its compile, for tests, tools and profiles
    run.compiled = lambda: lazy.poll() is not None
    return run
