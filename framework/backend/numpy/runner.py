"""Runs on the numpy backend: plans cached per program version, names and options; a run walks its plan's steps
and commits what changed.

A run: set the BLAS threads (``threads``: the executor's, or the cores other work leaves free); look up (or
build) the plan for this program version and these feed and fetch names (``plan``); check
the feeds and the scope's persistable values against their declared types (``shared/conformance``); walk the
plan's steps, dropping each intermediate array after its last use (``run``); then, only if every op succeeded,
write the persistable vars the run changed into the scope, all at once.
"""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ...errors import ExecutionError
from ..shared.conformance import checked_feeds, scope_value
from ..shared.signature import skipped_ops
from ...runtime.per_version import PerVersion
from ...runtime.place import CPUPlace
from ...runtime.scope import Scope
from .. import RunSettings
from .checks import declared_type, finite
from .plan import build_plan
from .plan_data import Plan, PlanOptions
from .run import run_plan
from ..shared.cores import cores_for_runs
from .threads import blas_threads

__all__ = ["NumpyRunner", "make_runner"]


def make_runner(settings: Callable[[], RunSettings]) -> "NumpyRunner":
    """The numpy backend's runner (``backend.runner``): CPU only."""
    place = settings().place
    if not isinstance(place, CPUPlace):
        raise ExecutionError(f"the numpy backend runs on the CPU; {place!r} needs a compiled backend: "
                             f"Executor({place!r}, backend='xla')")
    return NumpyRunner(settings)


class NumpyRunner:
    """One executor's runs on numpy, with the plan options its present settings ask for (``options()``)."""

    name = "numpy"

    def __init__(self, settings: Callable[[], RunSettings]):
        self._settings = settings
        self._plans = PerVersion()
        self._options: dict[tuple, PlanOptions] = {}

    def options(self, given: RunSettings | None = None) -> PlanOptions:
        """The executor's ``options`` (default ``PlanOptions()``) plus the checks its ``check_types`` and
        ``check_nan_inf`` ask for and its profiler, from its settings now (or ``given``, read already): the same
        object every time for the same settings, so that it keys the plan cache."""
        given = self._settings() if given is None else given
        key = (given.options, given.check_types, given.check_nan_inf, given.profiler)
        found = self._options.get(key)
        if found is None:
            found = PlanOptions() if given.options is None else given.options
            wanted = [c for c, on in ((declared_type, given.check_types), (finite, given.check_nan_inf)) if on]
            checks = found.checks + tuple(c for c in wanted if c not in found.checks)
            if wanted:
                found = replace(found, checks=checks)
            if given.profiler is not None:
                found = replace(found, profile=given.profiler)
            self._options[key] = found
        return found

    @staticmethod
    def problems(block) -> list[str]:
        """None: the reference interpreter runs every op that has a kernel, and every op has one."""
        return []

    def plan_for(self, program, feed_names: Sequence[str], fetch_names: Sequence[str],
                 built: Callable[[float], None], given: RunSettings | None = None) -> Plan:
        """The cached plan of ``program``'s block 0 for these names, built if missing or stale (``built(seconds)``
        is told of every build), with the options of the executor's settings (``given``, read already, or now)."""
        per_program = self._plans.entries(program)
        options = self.options(given)
        key = (tuple(sorted(feed_names)), tuple(fetch_names), options)
        plan = per_program.get(key)
        if plan is None:
            start = time.perf_counter()
            block = program.global_block()
            plan = build_plan(block, key[0], key[1], options, skip=skipped_ops(block, key[0], key[1]))
            per_program[key] = plan
            built(time.perf_counter() - start)
        return plan

    def run(self, program, feed: Mapping[str, Any], fetch_names: Sequence[str], scope: Scope, return_numpy: bool,
            mark: Callable[[str], None], built: Callable[[float], None], agreed: Callable[[], None]) -> list:
        """One run: the fetched arrays; the scope gets the changed persistables only if the whole run succeeds.
        ``mark(phase)`` ends each phase (``runtime/profile.PHASES``); ``agreed()`` raises before the commit when
        the other ranks of a data-parallel run were fed other shapes."""
        given = self._settings()  # once a run: the executor's flags may change between runs, not within one
        threads = given.threads
        with scope.run_lock, blas_threads(threads or cores_for_runs(), exact=threads is not None) as pool:
            if given.profiler is not None:
                given.profiler.ran_threads(program, pool)
            plan = self.plan_for(program, list(feed), fetch_names, built, given)
            mark("plan")
            env = self._initial_env(plan, feed, scope)
            mark("feeds")
            run_plan(plan, env)
            agreed()
            mark("loop")
            self._commit(plan, env, feed, scope)
            mark("commit")
        fetched = [self._fetched(plan, env, name, return_numpy) for name in plan.fetches]
        env.clear()
        mark("fetch")
        return fetched

    def _initial_env(self, plan: Plan, feed: Mapping[str, Any], scope: Scope) -> dict[str, Any]:
        block, declared = plan.block, plan.declared
        checked = checked_feeds(block, feed, declared)
        env = {name: checked[name] for name in plan.feeds if name in checked}
        for name in plan.from_scope:
            if name not in env:
                env[name] = scope_value(block, scope, name, declared[name])
        return env

    @staticmethod
    def _commit(plan: Plan, env: dict, feed: Mapping[str, Any], scope: Scope) -> None:
        """Write the persistable vars the run changed into the scope (the run has succeeded).

        All-or-nothing: the new values are gathered first and stored with one
        ``Scope.update``. A fed persistable var is not committed, even when an
        op updates it: the feed overrides the scope's value for this run only.
        """
        if not plan.commits:
            return
        fed = {id(v) for v in feed.values()}
        new: dict[str, np.ndarray] = {}
        for name in plan.commits:
            if name in feed:  # a feed overrides the scope for this run only: the scope keeps its own value
                continue
            value = env[name]
            # A view (or the caller's own feed array) could change under the scope later: own a copy.
            if id(value) in fed or (isinstance(value, np.ndarray) and not value.flags.owndata):
                value = np.array(value)
            new[name] = np.asarray(value)
        scope.update(new)

    def _fetched(self, plan: Plan, env: dict, name: str, return_numpy: bool):
        value = env[name]
        if not return_numpy:
            return value
        # A fetched persistable value is the scope's own array: hand out a copy the caller may change.
        if plan.block.find_var(name).persistable:
            return np.array(value)
        return np.asarray(value)
