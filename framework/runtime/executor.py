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

import os
import threading
import time
import weakref
from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from gradgen.program.describe import describe_var
from gradgen.program.guard import default_main_program

from ..errors import ExecutionError, FeedError
from .arguments import check_program, check_scope, feed_by_name, fetch_names
from .checks import declared_type, finite
from .conformance import as_declared, conforms
from .in_place import held_interrupts, prepare_in_place
from .place import check_place
from .plan import build_plan
from .communicator import abort_on_error, communicator, guard_launched_process
from .plan_data import Plan, PlanOptions
from .profile import Profile, Profiler
from .rank_runs import has_collectives, start_feed_check
from .run import run_plan
from .scope import Scope, global_scope

__all__ = ["CHECK_TYPES_ENV", "Executor"]

CHECK_TYPES_ENV = "GRADGEN_CHECK_TYPES"
"""With this environment variable set to 1, ``Executor()`` checks types unless told otherwise (the test suite
sets it in ``tests/conftest.py``, so every kernel that breaks its schema's promise fails a test)."""

guard_launched_process()  # under mpiexec, a rank that raises ends them all, init_parallel or not


def _unmarked(phase: str) -> None:
    """An unprofiled run's phase marks: nothing to time."""


def _agreed() -> None:
    """The feed check of a run without collective ops: no other rank to agree with."""


class Executor:
    """Runs programs on numpy. Plans are cached per program, version, feed names, fetch names and options.

    ``check_nan_inf`` makes every run check each op's float outputs and stop
    with a NanInfError at the first op that makes a NaN or Inf.
    ``check_types`` checks that every kernel returned the dtype and shape its
    var declares (-1 matches any size): a debugging aid and a test harness.
    Left as None, it is on when the environment variable ``GRADGEN_CHECK_TYPES``
    is ``1`` (``CHECK_TYPES_ENV``), as it is under the test suite.
    Both are checks a plan runs (``PlanOptions.checks``), inside sub-blocks too.
    ``options`` says how plans are compiled (``PlanOptions``: the schedule,
    buffers, fusion, the kernel table). ``plans_built`` counts compilations
    (a test uses it to see plans reused). ``place`` is accepted for Paddle's
    ``Executor(CPUPlace())``: only the CPU exists.
    """

    def __init__(self, place=None, *, check_nan_inf: bool = False, check_types: bool | None = None,
                 options: PlanOptions | None = None, profile: bool = False):
        self.place = check_place(place)
        self._run_lock = threading.RLock()
        self.check_nan_inf = check_nan_inf
        self.check_types = os.environ.get(CHECK_TYPES_ENV) == "1" if check_types is None else check_types
        self.options = PlanOptions() if options is None else options
        self.plans_built = 0
        self._plans: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()
        self._collective: "weakref.WeakKeyDictionary[Any, tuple[int, bool]]" = weakref.WeakKeyDictionary()
        self._with_checks: dict[tuple, PlanOptions] = {}
        self._profiler = Profiler() if profile else None

    def plan_options(self) -> PlanOptions:
        """``options`` plus the checks ``check_types`` and ``check_nan_inf`` ask for (the same object every
        time for the same settings, so that it keys the plan cache)."""
        key = (self.options, self.check_types, self.check_nan_inf)
        found = self._with_checks.get(key)
        if found is None:
            wanted = [c for c, on in ((declared_type, self.check_types), (finite, self.check_nan_inf)) if on]
            checks = self.options.checks + tuple(c for c in wanted if c not in self.options.checks)
            found = replace(self.options, checks=checks) if wanted else self.options
            if self._profiler is not None:
                found = replace(found, profile=self._profiler)
            self._with_checks[key] = found
        return found

    # -- planning ---------------------------------------------------------------
    def plan_for(self, program, feed_names: Sequence[str], fetch_names: Sequence[str]) -> Plan:
        """The cached plan of ``program``'s block 0 for these names, built if missing or stale."""
        per_program = self._plans.get(program)
        if per_program is None or per_program.get("version") != program.version:
            per_program = {"version": program.version}
            self._plans[program] = per_program
        options = self.plan_options()
        key = (tuple(sorted(feed_names)), tuple(fetch_names), options)
        plan = per_program.get(key)
        if plan is None:
            start = time.perf_counter()
            plan = build_plan(program.global_block(), key[0], key[1], options)
            per_program[key] = plan
            self.plans_built += 1
            if self._profiler is not None:
                self._profiler.built(program, time.perf_counter() - start)
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
        if self._has_collectives(program):  # the other ranks must learn of a failure here, or wait forever
            comm = communicator()
            with abort_on_error(comm, with_traceback=True):
                feed = feed_by_name(program, feed)
                agreed = start_feed_check(comm, feed)
                return self._locked_run(program, feed, fetch_names(program, fetch_list), scope, return_numpy, agreed)
        return self._locked_run(program, feed_by_name(program, feed), fetch_names(program, fetch_list), scope,
                                return_numpy)

    def _has_collectives(self, program) -> bool:
        """Whether block 0 of ``program`` waits for other ranks (cached per program version, as plans are)."""
        known = self._collective.get(program)
        if known is None or known[0] != program.version:
            known = (program.version, has_collectives(program.global_block()))
            self._collective[program] = known
        return known[1]

    def _locked_run(self, program, feed: Mapping[str, Any], fetched_names: list[str], scope: Scope,
                    return_numpy: bool, agreed: Callable[[], None] = _agreed) -> list:
        # Runs through one executor (its plans own buffers) and runs on one scope (read, compute, commit)
        # take turns: threads may share either, and no update is lost.
        if self._profiler is None:
            with self._run_lock:
                return self._run(program, feed, fetched_names, scope, return_numpy, _unmarked, agreed)
        with self._run_lock, self._profiler.run(program) as mark:
            return self._run(program, feed, fetched_names, scope, return_numpy, mark, agreed)

    def _run(self, program, feed: Mapping[str, Any], fetched_names: list[str], scope: Scope, return_numpy: bool,
             mark: Callable[[str], None], agreed: Callable[[], None]) -> list:
        """A run's phases, in order; ``mark(phase)`` ends each (``profile.PHASES``: a profiling executor times
        them; its steps time themselves, ``PlanOptions.profile``). ``agreed()`` raises, before the commit, if
        the other ranks were fed other shapes (``rank_runs.start_feed_check``)."""
        with scope.run_lock:
            plan = self.plan_for(program, list(feed), fetched_names)
            mark("plan")
            env = self._initial_env(plan, feed, scope)
            mark("feeds")
            writes = self._run_steps(plan, env, feed, scope)
            agreed()
            mark("loop")
            replaced = self._commit(plan, env, feed, scope, writes)
            mark("commit")
        fetched = [self._fetched(plan, env, name, return_numpy) for name in plan.fetches]
        env.clear()
        while replaced:  # popped one by one, so that each array's only reference is ``old``'s
            name, old = replaced.pop()
            plan.buffers.recycle(name, old)
            del old
        mark("fetch")
        return fetched

    def profile(self, program=None) -> Profile:
        """Where the runs of ``program`` (default: the default main program) spent their time, as plain data
        (``profile.Profile``: totals over the completed runs since the executor was made or ``reset_profile``)."""
        if self._profiler is None:
            raise ExecutionError("this executor does not profile: make it with Executor(profile=True)")
        return self._profiler.profile(check_program(default_main_program() if program is None else program))

    def reset_profile(self) -> None:
        """Forget what was measured (after warm-up runs, say)."""
        if self._profiler is None:
            raise ExecutionError("this executor does not profile: make it with Executor(profile=True)")
        self._profiler.reset()

    def _initial_env(self, plan: Plan, feed: Mapping[str, Any], scope: Scope) -> dict[str, Any]:
        block = plan.block
        env: dict[str, Any] = {}
        declared = plan.declared
        for name in feed:  # every feed is checked, even one no op reads
            value = feed[name]
            if not conforms(value, declared[name]):  # the slow path converts or explains
                value = as_declared(block, name, value, "feed", FeedError)
            if name in plan.feeds:
                env[name] = value
        for name in plan.from_scope:
            if name in env:
                continue
            if name not in scope:
                raise ExecutionError(f"block {block.idx}: persistable {describe_var(block, name)} is not in the "
                                     "scope (run the startup program first, or scope.set it)")
            value = scope[name]
            env[name] = value if conforms(value, declared[name]) else as_declared(
                block, name, value, "scope value", ExecutionError)
        return env

    @staticmethod
    def _run_steps(plan: Plan, env: dict, feed: Mapping[str, Any], scope: Scope) -> list[Callable[[], Any]]:
        """Run the plan's steps; return the in-place writes of its tail, prepared, for the commit to make
        (``in_place``), or none when the tail has run as ordinary steps."""
        if not plan.in_place:
            run_plan(plan, env)
            return []
        run_plan(plan, env, plan.head)
        tail = plan.steps[len(plan.head):]
        writes = prepare_in_place(tail, plan.in_place, env, feed, scope)
        if writes is None:
            run_plan(plan, env, tail, len(plan.head))
            return []
        return writes

    @staticmethod
    def _commit(plan: Plan, env: dict, feed: Mapping[str, Any], scope: Scope,
                writes: list[Callable[[], Any]] | None = None) -> list[tuple[str, Any]]:
        """Write the persistable vars the run changed into the scope (the run has succeeded).

        All-or-nothing, KeyboardInterrupt included: the new values are
        gathered first and stored with one ``Scope.update``; the tail's
        in-place ``writes`` are made right before it, with interrupts held
        back until both are done (``in_place.held_interrupts``). A fed
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
        if writes:
            with held_interrupts():
                for write in writes:
                    write()
                scope.update(new)
            del write
            writes.clear()  # each write holds its parameter: none may outlive the run, or the next refuses in place
        else:
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
