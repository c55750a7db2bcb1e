"""``Executor``: runs block 0 of a program on numpy, through a cached plan.

    exe = Executor()
    exe.run(startup)                                   # fills the parameters in the global scope
    (loss,) = exe.run(main, feed={"x": xs}, fetch_list=[loss_var])

A run: look up (or build) the plan for this program version and these feed
and fetch names; check the feeds and the scope's persistable values against
their declared types; walk the plan's steps, dropping each intermediate
array after its last use; then, only if every op succeeded, write the
persistable vars the run changed into the scope.
"""
from __future__ import annotations

import threading
import weakref
from typing import Any, Mapping, Sequence

import numpy as np

from gradgen.program.describe import describe_var, op_location
from gradgen.program.guard import default_main_program
from gradgen.program.shapes import format_shape

from ..errors import ExecutionError, FeedError, NanInfError
from .arguments import check_program, check_scope, feed_by_name, fetch_names
from .place import check_place
from .plan import Plan, build_plan, conforms, describe_inputs, kernel_error, run_plan
from .scope import Scope, global_scope
from .subblock import checked_runner


def _shape_matches(declared: Sequence[int], actual: Sequence[int]) -> bool:
    return len(declared) == len(actual) and all(d == -1 or d == a for d, a in zip(declared, actual))


def _check_value(block, name: str, value, what: str, error: type) -> np.ndarray:
    """``value`` as an array of var ``name``'s declared dtype and shape, or ``error``."""
    var = block.find_var(name)
    if not isinstance(value, (np.ndarray, np.generic)):
        # Python numbers and lists carry no dtype of their own: give them the declared one.
        try:
            value = np.asarray(value, dtype=var.dtype)
        except (TypeError, ValueError) as e:
            raise error(f"{what} '{name}' cannot be turned into a {var.dtype} array: {e}") from None
    value = np.asarray(value)
    if value.dtype != np.dtype(var.dtype):
        raise error(f"{what} '{name}' has dtype {value.dtype}, but {describe_var(block, name)} is declared; "
                    f"convert it with .astype('{var.dtype}')")
    if not _shape_matches(var.shape, value.shape):
        raise error(f"{what} '{name}' has shape {format_shape(value.shape)}, but {describe_var(block, name)} "
                    "is declared (-1 matches any size)")
    return value


class Executor:
    """Runs programs on numpy. Plans are cached per program, version, feed names and fetch names.

    ``check_nan_inf`` makes every run check each op's float outputs and stop
    with a NanInfError at the first op that makes a NaN or Inf.
    ``check_types`` checks that every kernel returned the dtype and shape its
    var declares (-1 matches any size): a debugging aid and a test harness.
    ``plans_built`` counts compilations (a test uses it to see plans reused).
    ``place`` is accepted for Paddle's ``Executor(CPUPlace())``: only the CPU exists.
    """

    def __init__(self, place=None, *, check_nan_inf: bool = False, check_types: bool = False):
        self.place = check_place(place)
        self._run_lock = threading.RLock()
        self.check_nan_inf = check_nan_inf
        self.check_types = check_types
        self.plans_built = 0
        self._plans: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()

    # -- planning ---------------------------------------------------------------
    def plan_for(self, program, feed_names: Sequence[str], fetch_names: Sequence[str]) -> Plan:
        """The cached plan of ``program``'s block 0 for these names, built if missing or stale."""
        per_program = self._plans.get(program)
        if per_program is None or per_program.get("version") != program.version:
            per_program = {"version": program.version}
            self._plans[program] = per_program
        key = (tuple(sorted(feed_names)), tuple(fetch_names))
        plan = per_program.get(key)
        if plan is None:
            plan = build_plan(program.global_block(), key[0], key[1])
            per_program[key] = plan
            self.plans_built += 1
        return plan

    # -- running ----------------------------------------------------------------
    def run(self, program=None, feed: Mapping[str, Any] | None = None, fetch_list: Sequence | None = None,
            scope: Scope | None = None, return_numpy: bool = True) -> list:
        """Run ``program`` (default: the default main program); return the fetched arrays in order.

        Persistable vars written by the run reach ``scope`` (default: the
        global scope) only if the whole run succeeds.
        """
        program = check_program(default_main_program() if program is None else program)
        scope = check_scope(global_scope() if scope is None else scope)
        feed = feed_by_name(program, feed)
        fetched_names = fetch_names(program, fetch_list)
        # Runs through one executor (its plans own buffers) and runs on one scope (read, compute, commit)
        # take turns: threads may share either, and no update is lost.
        with self._run_lock:
            with scope.run_lock:
                plan = self.plan_for(program, list(feed), fetched_names)
                env = self._initial_env(plan, feed, scope)
                if self.check_nan_inf or self.check_types:
                    self._run_checked(plan, env)
                else:
                    run_plan(plan, env)
                replaced = self._commit(plan, env, feed, scope)
            fetched = [self._fetched(plan, env, name, return_numpy) for name in plan.fetches]
            env.clear()
            while replaced:  # popped one by one, so that each array's only reference is ``old``'s
                name, old = replaced.pop()
                plan.buffers.recycle(name, old)
                del old
        return fetched

    def _initial_env(self, plan: Plan, feed: Mapping[str, Any], scope: Scope) -> dict[str, Any]:
        block = plan.block
        env: dict[str, Any] = {}
        declared = plan.declared
        for name in feed:  # every feed is checked, even one no op reads
            value = feed[name]
            if not conforms(value, declared[name]):  # the slow path converts or explains
                value = _check_value(block, name, value, "feed", FeedError)
            if name in plan.feeds:
                env[name] = value
        for name in plan.from_scope:
            if name in env:
                continue
            if name not in scope:
                raise ExecutionError(f"block {block.idx}: persistable {describe_var(block, name)} is not in the "
                                     "scope (run the startup program first, or scope.set it)")
            value = scope[name]
            env[name] = value if conforms(value, declared[name]) else _check_value(
                block, name, value, "scope value", ExecutionError)
        return env

    @staticmethod
    def _commit(plan: Plan, env: dict, feed: Mapping[str, Any], scope: Scope) -> list[tuple[str, Any]]:
        """Write the persistable vars the run changed into the scope (the run has succeeded).

        All-or-nothing, KeyboardInterrupt included: the new values are
        gathered first and stored with one ``Scope.update``. A fed
        persistable var is not committed, even when an op updates it: the
        feed overrides the scope's value for this run only. Returns the
        scope's previous arrays of vars updated in a plan buffer, for the plan
        to reuse once nothing else holds them.
        """
        if not plan.commits:
            return []
        fed = {id(v) for v in feed.values()}
        new: dict[str, np.ndarray] = {}
        replaced = []
        for name in plan.commits:
            if name in feed:  # a feed overrides the scope for this run only: the scope keeps its own value
                continue
            value = env[name]
            # A view (or the caller's own feed array) could change under the scope later: own a copy.
            if id(value) in fed or (isinstance(value, np.ndarray) and not value.flags.owndata):
                value = np.array(value)
            if name in plan.buffers.swaps:
                old = scope.own(name)
                if old is not None and old is not value:
                    replaced.append((name, old))
            new[name] = np.asarray(value)
        scope.update(new)
        return replaced

    def _fetched(self, plan: Plan, env: dict, name: str, return_numpy: bool):
        value = env[name]
        if not return_numpy:
            return value
        # A fetched persistable value is the scope's own array: hand out a copy the caller may change.
        if plan.block.find_var(name).persistable:
            return np.array(value)
        return np.asarray(value)

    def _run_checked(self, plan: Plan, env: dict) -> None:
        """The hot loop plus a NaN/Inf check of every float output."""
        token = checked_runner.set(self._run_checked)  # control-flow kernels check their sub-blocks too
        try:
            self._run_checked_steps(plan, env)
        finally:
            checked_runner.reset(token)

    def _run_checked_steps(self, plan: Plan, env: dict) -> None:
        block = plan.block
        for i, step in enumerate(plan.steps):
            op = block.ops[step.index]
            try:
                result = step.fn(*[env[n] for n in step.ins])
            except NanInfError as e:  # from inside a sub-block: keep its type, add where it ran
                raise NanInfError(f"{e} (inside {op_location(block, step.index, op.type, op.callsite)})") from e
            except Exception as e:
                raise kernel_error(plan, i, env, e) from e
            values = (result,) if step.out is not None else tuple(result)
            if len(values) != len(step.outs):
                raise kernel_error(plan, i, env, ValueError(
                    f"the kernel returned {len(values)} outputs for {len(step.outs)} output vars"))
            for n, v in zip(step.outs, values):
                v = np.asarray(v)
                if self.check_types:
                    var = block.var(n)
                    if v.dtype.name != var.dtype or not _shape_matches(var.shape, v.shape):
                        raise ExecutionError(f"{op_location(block, step.index, op.type, op.callsite)}: its kernel "
                                             f"returned {v.dtype.name}{format_shape(v.shape)} for output {n}, declared "
                                             f"{var.type_str()}")
                if self.check_nan_inf and v.dtype.kind in "fc" and not np.isfinite(v).all():
                    bad = "NaN" if np.isnan(v).any() else "Inf"
                    raise NanInfError(f"{op_location(block, step.index, op.type, op.callsite)} produced {bad} in "
                                      f"output {n} ({v.dtype}{format_shape(v.shape)}); inputs: "
                                      f"{describe_inputs(block, op, env)}")
                env[n] = v
            for n in step.dead:
                del env[n]
