"""``Executor``: runs block 0 of a program on a backend: numpy, through a cached plan, or a compiled one.

    exe = Executor()
    exe.run(startup)                                   # fills the parameters in the global scope
    (loss,) = exe.run(main, feed={"x": xs}, fetch_list=[loss_var])

The executor checks the arguments (``arguments``), takes the run lock, and hands the run to its backend's
runner, which it knows only through the backend interface (``backend.runner(name, settings)``):
``backend/numpy/runner.py`` (plan, steps) or ``backend/xla/runner.py`` (one compiled step), or the choice
between them (``auto_run``). Every runner checks feeds and scope values against their declared types
(``conformance``), runs, and commits the changed persistables only if the whole run succeeded (``commit``), so
a failed or interrupted run leaves the scope as it was.
"""
from __future__ import annotations

import os
import threading
import weakref
from functools import partial
from typing import Any, Callable, Mapping, Sequence, TypeVar

from gradgen.program.guard import default_main_program

from ..backend import AUTO, DEFAULT_BACKEND, NOT_BY_DEFAULT, RunSettings, Runner, backends, default_backend, runner
from ..errors import ExecutionError
from .allocator import keep_freed_blocks
from .auto_run import AutoRunner, LazyRunner
from .arguments import check_program, check_scope, feed_by_name, fetch_names
from .communicator import abort_on_error, communicator, guard_launched_process
from .per_version import PerVersion
from .place import CPUPlace, check_place
from .profile import Profile, Profiler
from .rank_runs import has_collectives, start_feed_check
from .remembered import enabled as remembering
from .scope import Scope, global_scope

__all__ = ["CHECK_TYPES_ENV", "Executor"]

T = TypeVar("T")

CHECK_TYPES_ENV = "GRADGEN_CHECK_TYPES"
"""With this environment variable set to 1, ``Executor()`` checks types unless told otherwise (the test suite
sets it in ``tests/conftest.py``, so every kernel that breaks its schema's promise fails a test)."""

guard_launched_process()  # under mpiexec, a rank that raises ends them all, init_parallel or not


def _unmarked(phase: str) -> None:
    """An unprofiled run's phase marks: nothing to time."""


def _agreed() -> None:
    """The feed check of a run without collective ops: no other rank to agree with."""


class Executor:
    """Runs programs on a backend (``backend``; by default the fastest installed one, measured per program:
    ``default_backend``). What a run builds (a numpy plan, a compiled block) is cached per program, version, feed
    names, fetch names and options.

    ``check_nan_inf`` makes every run check each op's float outputs and stop
    with a NanInfError at the first op that makes a NaN or Inf.
    ``check_types`` checks that every kernel returned the dtype and shape its
    var declares (-1 matches any size): a debugging aid and a test harness.
    Left as None, it is on when the environment variable ``GRADGEN_CHECK_TYPES``
    is ``1`` (``CHECK_TYPES_ENV``), as it is under the test suite.
    Both are checks a plan runs (``PlanOptions.checks``), inside sub-blocks too.
    ``backend`` names the engine (``gradgen.framework.backends()`` lists the installed ones): ``"numpy"``, the
    plan of numpy kernels, or a compiled one such as ``"xla"`` (``backend/xla/runner.py``), which compiles
    block 0 once per run signature and run-time shapes (``plans_built`` counts those compiles too); or
    ``"auto"``: each program's first runs try numpy and each installed compiled backend that can run it, and the
    fastest runs the rest (``runtime/auto_run.py``;
    ``backend_choice(program)`` and the profile say which and why).
    ``options`` says how numpy plans are built (``PlanOptions``: loop read-back,
    checks, the kernel table; the backend reads them). ``plans_built`` counts compilations
    (a test uses it to see plans reused). ``place`` is Paddle's ``Executor(CPUPlace())``;
    ``CUDAPlace(N)`` runs on GPU N with a compiled backend whose engine has a GPU build.
    ``threads`` sets how many threads the engine's pools use (numpy: its BLAS products; torch: its intra-op
    threads; xla: its CPU pool, made once per process, ``backend/xla/pool.py``); left as None, the
    numpy engine uses the cores other processes leave free, at most what its BLAS was told
    (``backend/shared/cores.py``, ``backend/numpy/threads.py``).
    The first executor a process makes keeps freed large blocks in the process for the next step (glibc's
    thresholds, ``runtime/allocator.py``; ``GRADGEN_MALLOC=system`` leaves them).
    """

    def __init__(self, place=None, *, check_nan_inf: bool = False, check_types: bool | None = None,
                 options: Any = None, profile: bool = False, backend: str | None = None,
                 threads: int | None = None):
        self.place = check_place(place)
        backend = default_backend(self.place, options, check_nan_inf, check_types) if backend is None else backend
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ExecutionError(f"threads must be a positive int or None, got {threads!r}")
        keep_freed_blocks()
        self.threads = threads
        self.backend = backend
        if backend == AUTO and not isinstance(self.place, CPUPlace):
            raise ExecutionError(f"backend 'auto' chooses among the numpy backend and the compiled ones, and the "
                                 f"numpy backend runs on the CPU; {self.place!r} needs backend='xla'")
        self._run_lock = threading.RLock()
        self.check_nan_inf = check_nan_inf
        self.check_types = os.environ.get(CHECK_TYPES_ENV) == "1" if check_types is None else check_types
        self._asked_check_types = bool(check_types)
        self.options = options
        self._profiler = Profiler() if profile else None
        self._choices = PerVersion()
        if backend == AUTO:
            self._runner = self._auto_runner()
        else:
            settings = self._settings if backend == DEFAULT_BACKEND else self._asked_settings
            made = settings()  # what a runner still at work once the executor is gone reads (``_weakly``)
            self._runner = runner(backend, _weakly(settings, lambda: made))
        self.plans_built = 0
        self._collective = PerVersion()

    def _numpy_only(self) -> str | None:
        """Why ``backend="auto"`` keeps this executor's runs on numpy whatever the timings: the per-op checks and
        plan options the caller asked for are the numpy backend's."""
        asked = [name for name, on in (("check_nan_inf", self.check_nan_inf), ("options", self.options is not None),
                                       ("check_types", self._asked_check_types)) if on]
        return f"{', '.join(asked)}: the numpy backend's settings" if asked else None

    def _settings(self) -> RunSettings:
        """The settings the backends read, as they are now (the check flags may change between runs)."""
        return RunSettings(self.place, self.check_types, self.check_nan_inf, self.options, self._profiler,
                           self.threads)

    def _asked_settings(self) -> RunSettings:
        """A compiled backend's settings: it refuses the type checks the caller asked for, not the default's."""
        return self._settings()._replace(check_types=self._asked_check_types)

    def _plain_settings(self) -> RunSettings:
        """The compiled backends' settings under ``backend="auto"``: no per-op checks, no options; the profiler, which
        counts their runs by the threads their pools ran at (``Profile.threads``)."""
        return RunSettings(self.place, False, False, None, self._profiler, self.threads, compile_behind=False)

    def _auto_runner(self) -> AutoRunner:
        """The runner of ``backend="auto"``: numpy, and every installed compiled backend not in
        ``NOT_BY_DEFAULT``, each made on first use."""
        made, plain = self._settings(), self._plain_settings()
        lazies = [LazyRunner(name, partial(runner, name, _weakly(self._plain_settings, lambda: plain)))
                  for name in backends() if name != DEFAULT_BACKEND and name not in NOT_BY_DEFAULT]
        return AutoRunner(runner(DEFAULT_BACKEND, _weakly(self._settings, lambda: made)), lazies,
                          _weakly(self._chose, lambda *args: None), numpy_only=_weakly(self._numpy_only, lambda: None),
                          remember=remembering(), threads=self.threads)

    def _chose(self, program, backend: str, reason: str) -> None:
        """``backend="auto"`` chose ``backend`` for the runs of ``program``'s present version."""
        self._choices.entries(program)["choice"] = (backend, reason)
        if self._profiler is not None:
            self._profiler.chose(program, backend, reason)

    def backend_choice(self, program=None) -> tuple[str, str] | None:
        """With ``backend="auto"``: (the backend chosen for ``program``'s present version, why), or None while its
        first runs still try both (``runtime/auto_run``). Other executors: their backend, "chosen by the caller"."""
        if self.backend != AUTO:
            return self.backend, "chosen by the caller"
        program = check_program(default_main_program() if program is None else program)
        return self._choices.entries(program).get("choice")

    # -- planning ---------------------------------------------------------------
    def plan_for(self, program, feed_names: Sequence[str], fetch_names: Sequence[str]) -> Any:
        """The numpy backend's cached plan of ``program``'s block 0 for these names, built if missing or stale
        (tools and tests read plans; a compiled backend has none)."""
        found: Runner = self._runner.runners[DEFAULT_BACKEND] if isinstance(self._runner, AutoRunner) else self._runner
        if not hasattr(found, "plan_for"):
            raise ExecutionError(f"plans are the numpy backend's; this executor runs on '{self.backend}'")
        return found.plan_for(program, feed_names, fetch_names, partial(self._built, program))

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
        known = self._collective.entries(program)
        if "collectives" not in known:
            known["collectives"] = has_collectives(program.global_block())
        return known["collectives"]

    def _locked_run(self, program, feed: Mapping[str, Any], fetched_names: list[str], scope: Scope,
                    return_numpy: bool, agreed: Callable[[], None] = _agreed) -> list:
        # Runs through one executor and runs on one scope (read, compute, commit)
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
        return self._runner.run(program, feed, fetched_names, scope, return_numpy, mark, partial(self._built, program),
                                agreed)

    def _built(self, program, seconds: float) -> None:
        """The backend built a plan of ``program``, or compiled it (a new run signature or new run-time shapes)."""
        self.plans_built += 1
        if self._profiler is not None:
            self._profiler.built(program, seconds)

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


def _weakly(method: Callable[..., T], gone: Callable[..., T]) -> Callable[..., T]:
    """``method``, bound to an executor, called through a weak reference to it; ``gone`` once it is collected.

    An executor's runners call back into it (its settings, its choices). Bound methods or closures over it would make
    a reference cycle, freed only by the collector's full passes, which come seldom (``append_backward`` hands its
    objects to the oldest generation): a process that made executors for a few hundred programs on the xla engine
    kept every executable (65,530 memory maps, then LLVM's "Cannot allocate memory" and a segfault). A runner still
    at work once its executor is gone (a compile in the background) gets ``gone``: the settings of the executor's
    making, no choice recorded."""
    owner, function = weakref.ref(method.__self__), method.__func__

    def call(*args: Any) -> T:
        executor = owner()
        return gone(*args) if executor is None else function(executor, *args)

    return call
