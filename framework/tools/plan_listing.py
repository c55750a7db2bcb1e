"""``gradgen show --plan``: the steps the numpy backend's plan runs, one per op in block order, and when each
intermediate var is freed (its last use): what the reference interpreter does, line by line."""
from __future__ import annotations

from typing import Sequence

from ..backend.numpy.plan import build_plan
from ..backend.numpy.plan_data import PlanOptions

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


def plan_lines(block, feeds: Sequence[str] | None = None, fetches: Sequence[str] = (),
               options: PlanOptions | None = None) -> list[str]:
    """One line per step of ``block``'s plan: the op it runs, what it writes, and the vars freed after it.

    >>> print("\\n".join(plan_lines(main.global_block(), fetches=["loss"])))  # doctest: +SKIP
    step 1: op #1 relu -> relu_0; frees elementwise_add_0
    """
    plan = build_plan(block, list(default_feeds(block) if feeds is None else feeds), list(fetches), options)
    lines = []
    for at, step in enumerate(plan.steps):
        outs = ", ".join(step.outs) or "-"
        frees = f"; frees {', '.join(step.dead)}" if step.dead else ""
        lines.append(f"step {at}: op #{step.index} {block.ops[step.index].type} -> {outs}{frees}")
    lines.append(f"{len(plan.steps)} steps for {len(block.ops)} ops, in block order")
    return lines
