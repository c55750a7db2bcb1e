"""Compiling one block into a ``Plan``: kernels built, names resolved, lifetimes decided.

A plan is plain data the run loop walks without thinking (``plan_data``): one ``Step`` per op, in block
order, holding the kernel function (built by its factory from the op's attrs, wrapped to run the checks
when there are any), the input names, the output name(s) and the names of the vars that die right after
the step. Planning also decides, before any op runs, which vars a run needs from outside (feeds and
persistable vars from the scope) and fails clearly when one cannot come from anywhere.

Nothing else happens here: no reordering, no fusion, no buffers shared between ops. The numpy backend is
the reference every other engine is checked against, so it runs the program as written; making it fast is
the compiled engines' job (``design_docs/executor.md``).
"""
from __future__ import annotations

from operator import itemgetter
from typing import AbstractSet, Any, Callable, Mapping, Sequence

from gradgen.program.describe import op_location

from ...errors import ExecutionError
from ..shared.conformance import declared
from ..shared.signature import commits, is_persistable as _is_persistable, sources
from .checks import checked
from .kernels import SUBBLOCKS, KernelFactory
from .kernels.control_flow import loop_stashes
from .kernels.signature import declares
from .plan_data import Plan, PlanOptions, Step
from .run import block_runner

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


def _dying(block, order: Sequence[int], keep: set) -> dict[int, list[str]]:
    """Op index -> the vars last used there that are neither fetched nor persistable."""
    last_use: dict[str, int] = {}
    for i in order:
        op = block.ops[i]
        for name in (*op.input_arg_names, *op.output_arg_names):
            last_use[name] = i
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
    order = [i for i in range(len(ops)) if i not in skip]
    owners = [i for i in order if ops[i].type in SUBBLOCKS]
    stashes = (loop_stashes(block, lambda op: declares(options.kernels.get(op.type), "stash"))
               if owners and options.read_back else {})
    subplans = {i: _subplans(block, i, ops[i], options, stashes.get(i)) for i in owners}
    dying = _dying(block, order, keep)
    steps = []
    for i in order:
        dead = tuple(dying.get(i, ()))
        fn = build_kernel(block, i, ops[i], options.kernels, _runners(subplans[i]) if i in subplans else None,
                          _dropped(ops[i].output_arg_names, dead, options), stashes.get(i))
        steps.append(_step(block, i, fn, dead, options))
    return Plan(block=block, steps=tuple(steps), feeds=tuple(feeds), from_scope=tuple(from_scope),
                commits=commits(block), fetches=tuple(fetch_names),
                declared={n: declared(block.var(n)) for n in (*feed_names, *from_scope)}, options=options,
                subplans=subplans)


def unmade_outputs(plan: Plan) -> frozenset[str]:
    """The outputs a run of ``plan`` never makes: those its kernels were told nobody reads (``dropped``) and that
    know to skip them (a ``while``'s unread History). Memory analysis counts them as nothing."""
    kernels, block = plan.options.kernels, plan.block
    return frozenset(name for step in plan.steps
                     if declares(kernels.get(block.ops[step.index].type), "dropped")
                     for name in _dropped(step.outs, step.dead, plan.options))


def _dropped(outs: Sequence[str], dying: Sequence[str], options: PlanOptions) -> frozenset[str]:
    """The outputs nothing reads after the op (they die where they are made); none in a checking plan, which
    checks every output."""
    return frozenset() if options.checks else frozenset(n for n in outs if n in dying)


def _runners(plans: Mapping[str, Plan]) -> dict[str, Callable[[dict], list]]:
    """What a control-flow factory gets: per key, a function running that sub-plan on an env, returning its fetches."""
    return {key: block_runner(plan) for key, plan in plans.items()}


def _step(block, index: int, fn: Callable[..., Any], dead: tuple[str, ...], options: PlanOptions) -> Step:
    op = block.ops[index]
    ins, outs = tuple(op.input_arg_names), tuple(op.output_arg_names)
    if options.checks:
        fn = checked(fn, block, index, ins, outs, options.checks)
    if options.profile is not None:
        fn = options.profile.timed(fn, block, (index,), op.type, "numpy")
    return Step(fn=fn, take=ins[0] if len(ins) == 1 else itemgetter(*ins) if ins else None, nargs=len(ins),
                out=outs[0] if len(outs) == 1 else None, outs=outs, dead=dead, ins=ins, index=index)
