"""``Executor(backend="auto")``: each program runs on the numpy backend while the compiled one compiles it, then on
both in turn until one is clearly faster, then on that one; the profile says which and why.

Why measure instead of a rule: which engine wins depends on the program and the machine. On the anchors'
workloads (design_docs/backends.md, "Choosing a backend") XLA runs a tanh RNN's step 3x faster than the numpy
backend and the seed MLP's 2x slower; ResNet blocks are faster on numpy, LeNet and a transformer block on XLA.

The trial, per program version, feed and fetch names, and feed shapes (a ``Trial``; a changed batch size is a
new trial, so each shape runs on its own winner):

1. The first ``NUMPY_FIRST`` runs, and at least ``NUMPY_SECONDS_FIRST`` of run time, are the numpy backend's: a
   program run once or twice (a startup program), or a job shorter than a compile, is never compiled.
2. Then the compiled backend compiles the step in a background thread (its runner's ``prepare``), and the runs
   stay on numpy until it is ready: no run waits on a compile. A compile that fails, or one the compiled backend
   declines because it might not finish (its runner's ``declines``: xla compiles a long block in pieces, but a
   long block with control flow compiles whole), leaves the program on numpy and says why. (A runner without ``prepare`` compiles in its first run.)
3. ``COMPILED_WARM`` runs on the compiled backend, not timed (the first run after a compile still runs slower
   than the rest: the anchors' RNN 6.8, then 4.0-4.4 ms).
4. Rounds of one run on each, alternating, timed from the call to the fetched arrays, until the two sets of
   times separate (the faster's upper quartile below the slower's lower quartile) after at least
   ``MIN_ROUNDS``, or ``MAX_ROUNDS`` rounds or ``TRIAL_SECONDS`` of timed runs have passed; the backend with the
   smaller median runs every later run. A run that fails counts for neither and is run again in the trial.

Both backends compute the same values (float64 to 1e-12, float32 to 1e-5: tests/backends), the scope holds
either's arrays, and a run commits only if it succeeds, so switching between runs changes nothing but the
speed. What stays on the numpy backend without a trial: programs with collective ops (every rank must run the
same engine, and their timings differ), programs the compiled backend cannot run or declines (the reason is
given), and every program when no compiled backend is installed.
"""
from __future__ import annotations

import statistics
import threading
import time
from typing import Any, Callable, Mapping, Sequence

from .per_version import PerVersion
from .rank_runs import has_collectives
from .scope import Scope

__all__ = ["COMPILED_WARM", "MAX_ROUNDS", "MIN_ROUNDS", "NUMPY_FIRST", "NUMPY_SECONDS_FIRST", "TRIAL_SECONDS",
           "AutoRunner", "LazyRunner", "Trial", "separated"]

NUMPY_FIRST = 2
"""Runs a program makes on the numpy backend before the compiled backend is tried."""

NUMPY_SECONDS_FIRST = 0.5
"""Seconds of runs a program spends on numpy before the compiled backend is tried: a job shorter than a compile
(the jax import and the compile take 1-2 s of a core) never pays for one (a digits CNN trained in 0.17 s on
numpy took 1.38 s when its compile started at the third run; tests/bench/partial_batch.py)."""

COMPILED_WARM = 1
"""Untimed runs on the compiled backend after its compile, before its timed ones."""

MIN_ROUNDS = 3
"""Timed runs on each backend before a choice may be made."""

MAX_ROUNDS = 15
"""Timed runs on each backend after which the smaller median wins even if the times still overlap."""

TRIAL_SECONDS = 2.0
"""Timed seconds (both backends) after which the smaller median wins, once ``MIN_ROUNDS`` are in."""

def separated(fast: Sequence[float], slow: Sequence[float]) -> bool:
    """Whether the run times ``fast`` are clearly below ``slow``: its upper quartile under the other's lower one."""
    upper = statistics.quantiles(fast, n=4, method="inclusive")[2]
    lower = statistics.quantiles(slow, n=4, method="inclusive")[0]
    return upper < lower


class Trial:
    """Where the runs of one program version, names and feed shapes go: the next backend, the times so far, the
    choice."""

    def __init__(self, compiled_name: str | None, stays_because: str | None = None, background: bool = False):
        self.compiled_name = compiled_name
        self.chosen: str | None = "numpy" if stays_because else None
        self.reason = stays_because or ""
        self.numpy_left = NUMPY_FIRST
        self.numpy_seconds = 0.0
        """Run time spent on numpy before the trial: the compile starts only after ``NUMPY_SECONDS_FIRST``."""
        self.compile: str = "due" if background else "inline"
        """How the compiled backend gets its step: "due" (a background compile is to start), "running", "ready",
        or "inline" (its first run compiles, untimed)."""
        self.warm_left = COMPILED_WARM + (1 if not background else 0)
        self.seconds: dict[str, list[float]] = {"numpy": [], compiled_name: []} if compiled_name else {"numpy": []}
        self._spent = 0.0
        self.told = False
        """Whether the executor has heard of the choice (a background compile may make it between runs)."""

    def next_backend(self) -> str:
        """The backend the next run goes to."""
        if self.chosen is not None:
            return self.chosen
        if self.numpy_left or self.compile in ("due", "running"):
            return "numpy"
        if self.warm_left:
            return self.compiled_name
        numpy_runs, compiled_runs = len(self.seconds["numpy"]), len(self.seconds[self.compiled_name])
        return self.compiled_name if compiled_runs <= numpy_runs else "numpy"

    def compiled(self, why_not: str | None) -> None:
        """The background compile finished: ready, or ``why_not`` (the program then stays on numpy)."""
        if why_not is None:
            self.compile = "ready"
        else:
            self.chosen, self.reason = "numpy", why_not

    def ran(self, backend: str, seconds: float) -> None:
        """A run on ``backend`` succeeded in ``seconds``: count it, and choose once the trial is over."""
        if self.chosen is not None:
            return
        if self.numpy_left:
            self.numpy_seconds += seconds
            if self.numpy_left > 1 or self.numpy_seconds >= NUMPY_SECONDS_FIRST:
                self.numpy_left -= 1
            return
        if self.compile in ("due", "running"):
            return  # numpy while the compile runs beside it: slowed by it, not timed
        if self.warm_left:
            if backend == self.compiled_name:
                self.warm_left -= 1
            return
        self.seconds[backend].append(seconds)
        self._spent += seconds
        self._decide()

    def _decide(self) -> None:
        numpy_times, compiled_times = self.seconds["numpy"], self.seconds[self.compiled_name]
        rounds = min(len(numpy_times), len(compiled_times))
        if rounds < MIN_ROUNDS or len(numpy_times) != len(compiled_times):
            return
        medians = {name: statistics.median(times) for name, times in self.seconds.items()}
        fast, slow = sorted(medians, key=lambda name: (medians[name], name != "numpy"))
        clear = separated(self.seconds[fast], self.seconds[slow])
        if not (clear or rounds >= MAX_ROUNDS or self._spent >= TRIAL_SECONDS):
            return
        self.chosen = fast
        shown = ", ".join(f"{name} {medians[name] * 1e3:.3g} ms" for name in medians)
        how = "apart" if clear else "overlapping"
        self.reason = f"median run over {rounds} runs each ({how}): {shown}"


def _feed_shapes(feed: Mapping[str, Any]) -> tuple:
    return tuple(sorted((name, tuple(getattr(value, "shape", ()))) for name, value in feed.items()))


class LazyRunner:
    """A compiled backend's runner, made on first use: importing one costs seconds (jax), which a program run
    once or twice, or an ``Executor()`` made and not used, should not pay. ``backend="auto"`` first uses it in
    its background compile."""

    def __init__(self, name: str, make: Callable[[], Any]):
        self.name, self._make, self._made, self._lock = name, make, None, threading.Lock()

    def made(self):
        """The runner, made now if it is not yet."""
        with self._lock:
            if self._made is None:
                self._made = self._make()
            return self._made

    def problems(self, block) -> list[str]:
        return self.made().problems(block)

    def prepare(self, program, feed: Mapping[str, Any], fetch_names: Sequence[str], scope: Scope) -> None:
        self.made().prepare(program, feed, fetch_names, scope)

    def declines(self, program) -> str | None:
        declines = getattr(self.made(), "declines", None)
        return declines(program) if declines is not None else None

    def run(self, *args) -> list:
        return self.made().run(*args)


class AutoRunner:
    """One executor's runs with ``backend="auto"``: the numpy runner, the compiled one (None when no compiled
    backend is installed), and a Trial per program version, names and feed shapes. ``chose(program, backend,
    reason)`` is told of each choice (the executor's profile shows it); ``numpy_only()`` says why the executor's
    settings keep every run on numpy, or None."""

    def __init__(self, numpy_runner, compiled_runner, chose: Callable[[Any, str, str], None],
                 clock: Callable[[], float] = time.perf_counter, numpy_only: Callable[[], str | None] = lambda: None):
        self.runners = {"numpy": numpy_runner}
        self.compiled_name = None
        if compiled_runner is not None:
            self.compiled_name = compiled_runner.name
            self.runners[self.compiled_name] = compiled_runner
        self._chose, self._clock, self._numpy_only = chose, clock, numpy_only
        self._trials = PerVersion()

    def trial(self, program, feed: Mapping[str, Any], fetch_names: Sequence[str]) -> Trial:
        """The Trial of ``program``'s present version for these names and feed shapes (a new one after the
        program changed)."""
        per_program = self._trials.entries(program)
        key = (tuple(sorted(feed)), tuple(fetch_names), _feed_shapes(feed))
        found = per_program.get(key)
        if found is None:
            background = hasattr(self.runners.get(self.compiled_name), "prepare")
            found = Trial(self.compiled_name, self._stays_on_numpy(program), background)
            per_program[key] = found
            self._tell(program, found)
        return found

    def _tell(self, program, trial: Trial) -> None:
        """Tell the executor of the trial's choice, once."""
        if trial.chosen is not None and not trial.told:
            trial.told = True
            self._chose(program, trial.chosen, trial.reason)

    def _stays_on_numpy(self, program) -> str | None:
        """Why ``program`` runs on numpy without a trial, or None."""
        if self.compiled_name is None:
            return "no compiled backend is installed (pip install 'gradgen[xla]')"
        pinned = self._numpy_only()
        if pinned:
            return pinned
        if has_collectives(program.global_block()):
            return "a data-parallel program: every rank must run the same backend"
        if not hasattr(self.runners[self.compiled_name], "prepare"):  # else asked in the background (a jax import)
            return self._cannot_run(program)
        return None

    def _cannot_run(self, program) -> str | None:
        runner = self.runners[self.compiled_name]
        problems = runner.problems(program.global_block())
        if problems:
            return f"{self.compiled_name} cannot run it: " + "; ".join(problems)
        declines = getattr(runner, "declines", None)
        return declines(program) if declines is not None else None

    def _start_compile(self, trial: Trial, program, feed: Mapping[str, Any], fetch_names: Sequence[str],
                       scope: Scope) -> None:
        """Compile the step for this trial in a background thread; the trial hears when it is done."""
        trial.compile = "running"
        compiled = self.runners[self.compiled_name]
        feed = dict(feed)
        fetch_names = list(fetch_names)

        def work() -> None:
            try:
                why_not = self._cannot_run(program)
                if why_not is None:
                    compiled.prepare(program, feed, fetch_names, scope)
            except Exception as e:  # noqa: BLE001 - any failure leaves the program on numpy, with the reason
                message = str(e).splitlines()[0] if str(e) else ""
                why_not = f"{self.compiled_name} could not compile it: {type(e).__name__}: {message}"
            trial.compiled(why_not)

        # Not a daemon: a process that ends mid-compile waits for it (a daemon thread killed inside XLA's C++
        # compiler aborts the process: "FATAL: exception not rethrown"). Compiles that could take long are
        # declined (the runner's ``declines``).
        threading.Thread(target=work, name="gradgen-auto-compile", daemon=False).start()

    def run(self, program, feed: Mapping[str, Any], fetch_names: Sequence[str], scope: Scope, return_numpy: bool,
            mark: Callable[[str], None], built: Callable[[float], None], agreed: Callable[[], None]) -> list:
        """One run on the backend the program's trial names (``runtime/executor``'s runner contract)."""
        trial = self.trial(program, feed, fetch_names)
        backend = trial.next_backend()
        if trial.chosen is not None:
            self._tell(program, trial)  # (a background compile may have failed since the last run)
            return self.runners[backend].run(program, feed, fetch_names, scope, return_numpy, mark, built, agreed)
        if trial.compile == "due" and not trial.numpy_left:
            self._start_compile(trial, program, feed, fetch_names, scope)
        start = self._clock()
        out = self.runners[backend].run(program, feed, fetch_names, scope, return_numpy, mark, built, agreed)
        trial.ran(backend, self._clock() - start)
        self._tell(program, trial)
        return out
