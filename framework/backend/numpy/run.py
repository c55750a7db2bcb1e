"""The run loop: one function walks every plan, checked or not, block 0 or a sub-block.

``run_plan`` does nothing per step but call the step's function on its
inputs, store the result and drop the vars that die there: about 0.3 us per
op. Checks are not a second loop: a checking plan's step functions run their
checks themselves (``checks.checked``), and this loop only turns a failure
into the public error.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from gradgen.program.describe import op_location

from ...errors import ExecutionError, NanInfError
from .checks import CheckFailed, describe_inputs
from .plan_data import Plan, Step

__all__ = ["StepFailed", "block_runner", "kernel_error", "run_plan", "run_steps"]


class StepFailed(Exception):
    """Raised by ``run_steps`` when a step's function raised ``error``: at which position."""

    def __init__(self, position: int, error: Exception):
        super().__init__(str(error))
        self.position, self.error = position, error


def run_steps(steps: Sequence[Step], env: dict, first: int = 0) -> None:
    """The loop itself: call each step's function on its inputs from ``env``, store its result(s), drop the
    vars that die there. A failing step raises StepFailed (its position, counted from ``first``, and the error)."""
    i = first
    try:
        for i, (fn, take, nargs, out, outs, dead, _, _) in enumerate(steps, first):
            if nargs == 1:
                result = fn(env[take])
            elif nargs:
                result = fn(*take(env))
            else:
                result = fn()
            if out is not None:
                if type(result) is tuple:  # (a kernel of several results for one var: say so here, not at a fetch)
                    raise ValueError(f"the kernel returned {len(result)} outputs for 1 output var")
                env[out] = result
            else:
                if len(result) != len(outs):
                    raise ValueError(f"the kernel returned {len(result)} outputs for {len(outs)} output vars")
                for n, v in zip(outs, result):
                    env[n] = v
            for n in dead:
                del env[n]
    except Exception as e:
        raise StepFailed(i, e) from e


def run_plan(plan: Plan, env: dict, steps: Sequence[Step] | None = None, first: int = 0) -> None:
    """Run ``plan``'s steps on ``env`` (name -> array), which holds the feeds and scope values it needs.

    ``steps`` (default: all of them) may be the part of ``plan.steps`` that starts at position ``first``.

    Outputs are stored in ``env`` and intermediates are deleted after their
    last use. A failing kernel raises an ExecutionError that names the op,
    its callsite and its inputs' run-time types; a failed check raises the
    check's error; a NaN found inside a sub-block keeps its type and says
    which op of this block ran the sub-block.

    numpy's floating-point warnings are off inside (log(0) is -inf, a NaN cast is whatever the program says):
    IEEE results are the program's semantics on every engine (``numerics.md``), and a program checks them
    with ``check_nan_inf``, not with numpy's warnings, which the other engines never give.
    """
    try:
        with np.errstate(all="ignore"):
            run_steps(plan.steps if steps is None else steps, env, first)
    except StepFailed as failed:
        _raise_public(plan, failed, env)


def _raise_public(plan: Plan, failed: StepFailed, env: Mapping[str, Any]) -> None:
    """Raise the public error for step ``failed.position`` of ``plan`` (see ``run_plan``)."""
    i, e = failed.position, failed.error
    if isinstance(e, CheckFailed):
        raise e.error from None
    if isinstance(e, NanInfError):
        raise NanInfError(f"{e} (inside {_where(plan, i)})") from e
    raise kernel_error(plan, i, env, e) from e


def block_runner(plan: Plan) -> Callable[[dict], list]:
    """A function running sub-block ``plan`` on an env (consumed) and returning its fetches in order, failing as
    ``run_plan`` does: what a control-flow kernel calls, twice an iteration in a loop, so it calls the run loop
    itself."""
    steps, fetches = plan.steps, plan.fetches

    def run(env: dict) -> list:
        try:
            run_steps(steps, env)
        except StepFailed as failed:
            _raise_public(plan, failed, env)
        return [env[n] for n in fetches]

    return run


def _where(plan: Plan, position: int, index: int | None = None) -> str:
    block = plan.block
    index = plan.steps[position].index if index is None else index
    op = block.ops[index]
    return op_location(block, index, op.type, op.callsite)


def kernel_error(plan: Plan, position: int, env: Mapping[str, Any], e: Exception) -> ExecutionError:
    """The error for a kernel that raised ``e`` at step ``position`` of ``plan``."""
    index = plan.steps[position].index
    op = plan.block.ops[index]
    return ExecutionError(f"{_where(plan, position, index)} failed: {type(e).__name__}: {e}; "
                          f"inputs: {describe_inputs(op, env)}")
