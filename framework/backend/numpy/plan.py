"""Compiling one block into a ``Plan``: kernels built, names resolved, lifetimes decided.

A plan is plain data the run loop walks without thinking (``plan_data``):
one ``Step`` per unit of work (an op, or a fused region of ops), holding the
kernel function (already built by its factory from the op's attrs, wrapped
to write into its plan buffer and to run the checks when there are any),
the input names, the output name(s) and the names of the vars that die
right after the step. Planning also decides, before any op runs, which vars
a run needs from outside (feeds and persistable vars from the scope) and
fails clearly when one cannot come from anywhere.

The stages, each switchable with ``PlanOptions``: the run order
(``schedule``), fusion (``fusion``), kernels (sub-blocks compiled first and
handed to their op's factory), liveness, buffers (``buffers``), checks
(``checks``).
"""
from __future__ import annotations

from operator import itemgetter
from typing import AbstractSet, Any, Callable, Mapping, Sequence

from gradgen.program.describe import op_location

from ...errors import ExecutionError
from .buffers import Buffers, assign_slots, slotted
from .checks import checked
from ...runtime.conformance import declared
from .fuse_region import fuse_regions
from .fusion import fuse_gemm_updates, is_gemm_update, sgd_gemm_writer
from .in_place import in_place_tail, sink_updates
from .kernels import SUBBLOCKS, KernelFactory, takes_out, with_out
from .kernels.control_flow import loop_stashes
from .kernels.signature import declares
from .plan_data import Plan, PlanOptions, Step, Unit
from .run import block_runner
from .schedule import schedule
from ...runtime.signature import commits, is_persistable as _is_persistable, sources

__all__ = ["PlanOptions", "build_kernel", "build_plan", "unmade_outputs"]


def build_kernel(block, index: int, op, kernels: Mapping[str, KernelFactory],
                 blocks: Mapping[str, Callable[[dict], list]] | None = None,
                 dropped: frozenset[str] = frozenset(), stash: Any = None) -> Callable[..., Any]:
    """The op's kernel function, built by its factory (given ``blocks``, its sub-block runners, if it owns any,
    ``dropped``, the outputs nothing reads afterwards, and ``stash``, what links a loop to the gradient loop that
    reads it back, each if it declares that keyword); an ExecutionError if there is no factory or it refuses."""
    factory = kernels.get(op.type)
    where = op_location(block, index, op.type, op.callsite)
    if factory is None:
        raise ExecutionError(f"{where}: no kernel is registered for op type '{op.type}'")
    told = {"dropped": dropped} if dropped and declares(factory, "dropped") else {}
    if stash is not None and declares(factory, "stash"):
        told["stash"] = stash
    try:
        return factory(op, **told) if blocks is None else factory(op, blocks, **told)
    except Exception as e:  # a factory rejecting attrs: report it where the op is
        raise ExecutionError(f"{where}: cannot build its kernel: {type(e).__name__}: {e}") from e


def _subplans(block, index: int, op, options: PlanOptions, stash: Any = None) -> dict[str, Plan]:
    """The compiled sub-blocks op ``index`` runs, by key, built with the same options (checks included); a loop
    linked to another by ``stash`` (``loop_stashes``) has the sub-blocks that link needs."""
    plans = {}
    subs = SUBBLOCKS[op.type](op) if stash is None else SUBBLOCKS[op.type](op, stash)
    for key, sub in subs.items():
        try:
            plans[key] = build_plan(block.program.block(sub.block), list(dict.fromkeys(sub.feeds)), list(sub.fetches),
                                    options, skip=sub.skip)
        except ExecutionError as e:
            where = op_location(block, index, op.type, op.callsite)
            raise ExecutionError(f"{where}: cannot build its kernel: its {key} block: {type(e).__name__}: {e}") from e
    return plans


def _dying(block, units: Sequence[Unit], keep: set) -> dict[int, list[str]]:
    """Position -> the vars last used there that are neither fetched nor persistable."""
    last_use: dict[str, int] = {}
    for at, unit in enumerate(units):
        for name in unit.ins + unit.outs:
            last_use[name] = at
    dying: dict[int, list[str]] = {}
    for name, at in last_use.items():
        if name not in keep and not _is_persistable(block, name):
            dying.setdefault(at, []).append(name)
    return dying


def build_plan(block, feed_names: Sequence[str], fetch_names: Sequence[str],
               options: PlanOptions | None = None, skip: AbstractSet[int] = frozenset()) -> Plan:
    """Compile ``block`` for a run fed ``feed_names`` and fetching ``fetch_names``, leaving out the ops at
    ``skip`` (what they make is fed).

    Raises FeedError when a feed names no var or an op input cannot come from
    anywhere, and ExecutionError when a fetched var is never available, an
    op type has no kernel, or a sub-block cannot be compiled.
    """
    options = PlanOptions() if options is None else options
    feeds, from_scope = sources(block, feed_names, fetch_names, skip)
    keep = set(fetch_names)
    ops = block.ops
    order = [i for i in (schedule(ops) if options.schedule else range(len(ops))) if i not in skip]
    units = [Unit(index=i, ops=(i,), ins=tuple(ops[i].input_arg_names), outs=tuple(ops[i].output_arg_names))
             for i in order]
    if options.fuse:
        units = fuse_gemm_updates(block, units, keep)
        if block.idx == 0 and options.buffers and not options.checks:  # the plans that have an in-place tail
            units = sink_updates(block, units)
        if options.regions and not options.checks:  # a checking plan checks every op's outputs, so runs them one by one
            units = fuse_regions(block, units, keep, options.kernels, options.warm_runs, options.background_compile)
    owners = [u.index for u in units if u.kernel is None and ops[u.index].type in SUBBLOCKS]
    stashes = (loop_stashes(block, lambda op: declares(options.kernels.get(op.type), "stash"))
               if owners and options.read_back else {})
    subplans = {i: _subplans(block, i, ops[i], options, stashes.get(i)) for i in owners}
    dying = _dying(block, units, keep)
    fns = [u.kernel or build_kernel(block, u.index, ops[u.index], options.kernels,
                                    _runners(subplans[u.index]) if u.index in subplans else None,
                                    _dropped(u, dying.get(at, ()), options), stashes.get(u.index))
           for at, u in enumerate(units)]
    buffers = Buffers()
    if options.buffers:
        writes_into = {at for at, fn in enumerate(fns) if takes_out(fn)}
        by_step, swaps, count = assign_slots(block, units, writes_into, dying, keep)
        buffers = Buffers([None] * count, swaps, by_step)
    steps = tuple(_step(block, at, unit, fn, buffers, tuple(dying.get(at, ())), options)
                  for at, (unit, fn) in enumerate(zip(units, fns)))
    # Only block 0 commits to a scope; a checking plan runs every step through its checks.
    tail = in_place_tail(block, units) if block.idx == 0 and options.buffers and not options.checks else 0
    return Plan(block=block, steps=steps, feeds=tuple(feeds), from_scope=tuple(from_scope), commits=commits(block),
                fetches=tuple(fetch_names), buffers=buffers,
                declared={n: declared(block.var(n)) for n in (*feed_names, *from_scope)}, options=options,
                subplans=subplans, head=steps[:len(steps) - tail],
                in_place=tuple(_writer(block, u, options) for u in units[len(units) - tail:]))


def _writer(block, unit: Unit, options: PlanOptions) -> Callable[..., Any]:
    """The in-place writer of a tail unit (``in_place``), timed into its step's row in a profiling plan."""
    writer = sgd_gemm_writer(block.ops[unit.ops[0]])
    return writer if options.profile is None else options.profile.timed_writer(writer, block, unit.ops)


def unmade_outputs(plan: Plan) -> frozenset[str]:
    """The outputs a run of ``plan`` never makes: those its kernels were told nobody reads (``dropped``) and that
    know to skip them (a ``while``'s unread History). Memory analysis counts them as nothing."""
    kernels, block = plan.options.kernels, plan.block
    return frozenset(name for step in plan.steps if len(step.ops) == 1
                     and declares(kernels.get(block.ops[step.index].type), "dropped")
                     for name in _dropped_names(step.outs, step.dead, plan.options))


def _dropped_names(outs: Sequence[str], dying: Sequence[str], options: PlanOptions) -> frozenset[str]:
    return frozenset() if options.checks else frozenset(n for n in outs if n in dying)


def _dropped(unit: Unit, dying: Sequence[str], options: PlanOptions) -> frozenset[str]:
    """The unit's outputs nothing reads after it (they die where they are made); none in a checking plan, which
    checks every output."""
    return _dropped_names(unit.outs, dying, options)


def _runners(plans: Mapping[str, Plan]) -> dict[str, Callable[[dict], list]]:
    """What a control-flow factory gets: per key, a function running that sub-plan on an env, returning its fetches."""
    return {key: block_runner(plan) for key, plan in plans.items()}


def _kind(block, unit: Unit) -> str:
    """What a profile calls the step: its op's type, or what fused its ops."""
    if unit.kernel is None:
        return block.ops[unit.index].type
    if getattr(unit.kernel, "region", False):
        return "region"
    return "matmul+sgd"


def _step(block, at: int, unit: Unit, fn: Callable[..., Any], buffers: Buffers, dead: tuple[str, ...],
          options: PlanOptions) -> Step:
    k = buffers.by_step.get(at)
    if k is not None:
        fn = slotted(with_out(fn), buffers.slots, k)
    if options.checks:
        fn = checked(fn, block, unit.index, unit.ins, unit.outs, options.checks)
    if options.profile is not None:
        fn = options.profile.timed(fn, block, unit.ops, _kind(block, unit), unit.kernel)
    ins, outs = unit.ins, unit.outs
    return Step(fn=fn, take=ins[0] if len(ins) == 1 else itemgetter(*ins) if ins else None, nargs=len(ins),
                out=outs[0] if len(outs) == 1 else None, outs=outs, dead=dead, ins=ins, index=unit.index, ops=unit.ops)
