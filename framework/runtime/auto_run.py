"""``Executor(backend="auto")``: each program runs on the numpy backend and on the compiled one for a few runs, then
on whichever was faster, and the profile says which and why.

Why measure instead of a rule: which engine wins depends on the program and the machine. On the anchors'
workloads (design_docs/backends.md, "Choosing a backend") XLA runs a tanh RNN's step 5x faster than the numpy
backend and the seed MLP's 2x slower; ResNet blocks are faster on numpy, LeNet and a transformer block on XLA.

The trial, per program version, feed names and fetch names (a ``Trial``):

1. The first ``NUMPY_FIRST`` runs are the numpy backend's: a program run once or twice (a startup program) is
   never compiled.
2. ``COMPILED_WARM`` runs on the compiled backend, not timed: the first compiles the step, the second still runs
   slower than the rest (measured: the anchors' RNN 254, 6.8, then 4.0-4.4 ms; LeNet 252, 19.5, then 8.2-8.8).
3. ``ROUNDS`` rounds of one run on each, alternating, timed from the call to the fetched arrays; the backend with
   the smaller median runs every later run. A run that fails counts for neither and is run again in the trial.

Both backends compute the same values (float64 to 1e-12, float32 to 1e-5: tests/backends), the scope holds
either's arrays, and a run commits only if it succeeds, so switching between runs changes nothing but the
speed. What stays on the numpy backend without a trial: programs with collective ops (every rank must run the
same engine, and their timings differ), programs the compiled backend cannot run (the reason is given), and
every program when no compiled backend is installed.
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Mapping, Sequence

from .per_version import PerVersion
from .rank_runs import has_collectives
from .scope import Scope

__all__ = ["COMPILED_WARM", "NUMPY_FIRST", "ROUNDS", "AutoRunner", "Trial"]

NUMPY_FIRST = 2
"""Runs a program makes on the numpy backend before the compiled backend is tried."""

COMPILED_WARM = 2
"""Untimed runs on the compiled backend before its timed ones (its compile, and one more warm-up)."""

ROUNDS = 3
"""Timed runs on each backend before choosing (after the compiled backend's first, compiling, run)."""


class Trial:
    """Where the runs of one program version and names go: the next backend to run, the times so far, the choice."""

    def __init__(self, compiled_name: str | None, stays_because: str | None = None):
        self.compiled_name = compiled_name
        self.plan = [] if stays_because else (["numpy"] * NUMPY_FIRST + [compiled_name] * COMPILED_WARM
                                              + [compiled_name, "numpy"] * ROUNDS)
        """The backends of the coming trial runs, in order; empty once chosen."""
        self.untimed = 0 if stays_because else NUMPY_FIRST + COMPILED_WARM
        """How many of the first planned runs are not timed (the numpy plan build, the compile, a warm-up)."""
        self.seconds: dict[str, list[float]] = {"numpy": [], compiled_name: []} if compiled_name else {"numpy": []}
        self.chosen: str | None = "numpy" if stays_because else None
        self.reason = stays_because or ""

    def next_backend(self) -> str:
        """The backend the next run goes to."""
        return self.chosen if self.chosen is not None else self.plan[0]

    def ran(self, backend: str, seconds: float) -> None:
        """A run on ``backend`` succeeded in ``seconds``: count it, and choose once the trial is over."""
        if self.chosen is not None:
            return
        self.plan.pop(0)
        if self.untimed:
            self.untimed -= 1
        else:
            self.seconds[backend].append(seconds)
        if not self.plan:
            medians = {name: statistics.median(times) for name, times in self.seconds.items()}
            self.chosen = min(medians, key=lambda name: (medians[name], name != "numpy"))
            shown = ", ".join(f"{name} {medians[name] * 1e3:.3g} ms" for name in medians)
            self.reason = f"median run over {ROUNDS} runs each: {shown}"


class AutoRunner:
    """One executor's runs with ``backend="auto"``: the numpy runner, the compiled one (None when no compiled
    backend is installed), and a Trial per program version and names. ``chose(program, backend, reason)`` is told
    of each choice (the executor's profile shows it)."""

    def __init__(self, numpy_runner, compiled_runner, chose: Callable[[Any, str, str], None],
                 clock: Callable[[], float] = time.perf_counter):
        self.runners = {"numpy": numpy_runner}
        self.compiled_name = None
        if compiled_runner is not None:
            self.compiled_name = compiled_runner.name
            self.runners[self.compiled_name] = compiled_runner
        self._chose, self._clock = chose, clock
        self._trials = PerVersion()

    def trial(self, program, feed_names: Sequence[str], fetch_names: Sequence[str]) -> Trial:
        """The Trial of ``program``'s present version for these names (a new one after the program changed)."""
        per_program = self._trials.entries(program)
        key = (tuple(sorted(feed_names)), tuple(fetch_names))
        found = per_program.get(key)
        if found is None:
            found = Trial(self.compiled_name, self._stays_on_numpy(program))
            per_program[key] = found
            if found.chosen is not None:
                self._chose(program, found.chosen, found.reason)
        return found

    def _stays_on_numpy(self, program) -> str | None:
        """Why ``program`` runs on numpy without a trial, or None."""
        if self.compiled_name is None:
            return "no compiled backend is installed (pip install 'gradgen[xla]')"
        if has_collectives(program.global_block()):
            return "a data-parallel program: every rank must run the same backend"
        problems = self.runners[self.compiled_name].problems(program.global_block())
        if problems:
            return f"{self.compiled_name} cannot run it: " + "; ".join(problems)
        return None

    def run(self, program, feed: Mapping[str, Any], fetch_names: Sequence[str], scope: Scope, return_numpy: bool,
            mark: Callable[[str], None], built: Callable[[float], None], agreed: Callable[[], None]) -> list:
        """One run on the backend the program's trial names (``runtime/executor``'s runner contract)."""
        trial = self.trial(program, list(feed), fetch_names)
        backend = trial.next_backend()
        if trial.chosen is not None:
            return self.runners[backend].run(program, feed, fetch_names, scope, return_numpy, mark, built, agreed)
        start = self._clock()
        out = self.runners[backend].run(program, feed, fetch_names, scope, return_numpy, mark, built, agreed)
        trial.ran(backend, self._clock() - start)
        if trial.chosen is not None:
            self._chose(program, trial.chosen, trial.reason)
        return out
