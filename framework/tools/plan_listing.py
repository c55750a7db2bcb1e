"""``gradgen show --plan``: the steps a compiled plan runs, fused steps with the ops in each.

A fused step is one kernel running several ops (a region, or a
product fused into its SGD update); listing them is how a user sees what
fusion did, and which vars never exist because of it.
"""
from __future__ import annotations

from typing import Sequence

from ..backend.numpy.plan import build_plan
from ..backend.numpy.plan_data import Plan, PlanOptions

__all__ = ["default_feeds", "plan_lines"]


def default_feeds(block) -> list[str]:
    """The vars a run of ``block`` must be fed: read before any op makes them, and not persistable."""
    made: set[str] = set()
    feeds: dict[str, None] = {}
    for op in block.ops:
        for name in op.input_arg_names:
            if name not in made and not block.var(name).persistable:
                feeds[name] = None
        made.update(op.output_arg_names)
    return list(feeds)


def _kind(plan: Plan, step) -> str:
    types = [plan.block.ops[i].type for i in step.ops]
    if _wrapped_attr(step, "region"):
        return "region (one generated function)"
    return "gemm+sgd"


def plan_lines(block, feeds: Sequence[str] | None = None, fetches: Sequence[str] = (),
               options: PlanOptions | None = None) -> list[str]:
    """One line per step of ``block``'s plan; a fused step lists its ops and the vars it writes.

    >>> print("\\n".join(plan_lines(main.global_block(), fetches=["loss"])))  # doctest: +SKIP
    step 1: fused region (one generated function), ops #1 elementwise_add, #2 relu -> relu_0
    """
    plan = build_plan(block, list(default_feeds(block) if feeds is None else feeds), list(fetches), options)
    lines = []
    fused = 0
    for at, step in enumerate(plan.steps):
        op = block.ops[step.index]
        outs = ", ".join(step.outs) or "-"
        if len(step.ops) > 1 or _is_group(step):
            fused += 1
            ops = ", ".join(f"#{i} {block.ops[i].type}" for i in step.ops)
            tail = " (in place, in the commit)" if plan.in_place and at >= len(plan.head) else ""
            lines.append(f"step {at}: fused {_kind(plan, step)}{tail}, ops {ops} -> {outs}")
        else:
            lines.append(f"step {at}: op #{step.index} {op.type} -> {outs}")
    lines.append(f"{len(plan.steps)} steps for {len(block.ops)} ops, {fused} fused")
    return lines


def _is_group(step) -> bool:
    """True when the step's function is, or wraps (buffers, checks), a generated loop or region."""
    return _wrapped_attr(step, "fused_ops")


def _wrapped_attr(step, attr: str) -> bool:
    """True when the step's function, or one it wraps (buffers, checks), has ``attr`` set."""
    todo, seen = [step.fn], 0
    while todo and seen < 16:
        fn = todo.pop()
        seen += 1
        if getattr(fn, attr, None) is not None:
            return True
        todo.extend(c.cell_contents for c in getattr(fn, "__closure__", None) or () if callable(c.cell_contents))
    return False
