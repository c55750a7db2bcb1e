"""Running a sub-block from inside a control-flow kernel.

A sub-block is compiled into an ordinary ``Plan`` (its feeds are the values
the owning op binds: its ``Input`` vars and the block's parameter vars) and
walked on a fresh dict per run, so every run of a loop body gets its own
record of values: nothing one iteration makes is overwritten by the next.
"""
from __future__ import annotations

from typing import Any, Sequence

from program.describe import op_location

from .errors import ExecutionError, GradgenError
from .plan import Plan, build_plan


def compile_block(block, feed_names: Sequence[str], fetch_names: Sequence[str]) -> Plan:
    """The plan of ``block`` fed ``feed_names`` and fetching ``fetch_names`` (errors name the block)."""
    return build_plan(block, list(dict.fromkeys(feed_names)), list(fetch_names))


def run_block(plan: Plan, env: dict[str, Any]) -> list[Any]:
    """Run ``plan``'s steps on ``env`` (consumed) and return its fetches in order."""
    block = plan.block
    for i, step in enumerate(plan.steps):
        try:
            result = step.fn(*[env[n] for n in step.ins])
        except GradgenError:
            raise
        except Exception as e:
            op = block.ops[i]
            raise ExecutionError(f"{op_location(block, i, op.type, op.callsite)} failed: {type(e).__name__}: {e}") from e
        if step.out is not None:
            env[step.out] = result
        else:
            env.update(zip(step.outs, result))
        for n in step.dead:
            del env[n]
    return [env[n] for n in plan.fetches]
