"""Running a sub-block from inside a control-flow kernel.

A sub-block is compiled into an ordinary ``Plan`` (its feeds are the values
the owning op binds: its ``Input`` vars and the block's parameter vars) and
walked on a fresh dict per run, so every run of a loop body gets its own
record of values: nothing one iteration makes is overwritten by the next.
"""
from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Callable, Sequence

from .plan import Plan, build_plan, run_plan

checked_runner: ContextVar[Callable[[Plan, dict], None] | None] = ContextVar("checked_runner", default=None)
"""Set by an Executor running with ``check_nan_inf`` or ``check_types``: sub-blocks run under the same checks."""


def compile_block(block, feed_names: Sequence[str], fetch_names: Sequence[str]) -> Plan:
    """The plan of ``block`` fed ``feed_names`` and fetching ``fetch_names`` (errors name the block)."""
    return build_plan(block, list(dict.fromkeys(feed_names)), list(fetch_names))


def run_block(plan: Plan, env: dict[str, Any]) -> list[Any]:
    """Run ``plan``'s steps on ``env`` (consumed) and return its fetches in order.

    A failing op inside raises the executor's located ExecutionError for the
    sub-block; the owning op's kernel error wraps it, so the message names
    both ops. Under a checking Executor, the sub-block's ops are checked too.
    """
    runner = checked_runner.get()
    (runner or run_plan)(plan, env)
    return [env[n] for n in plan.fetches]
