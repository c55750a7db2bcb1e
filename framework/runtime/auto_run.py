"""``Executor(backend="auto")``: each program runs on the numpy backend while the compiled ones (the candidates:
xla, torch) prepare it, then on each in turn until one is clearly the fastest, then on that one; the profile
says which and why.

Why measure instead of a rule: which engine wins depends on the program and the machine. On the anchors'
workloads (design_docs/backends.md, "Choosing a backend") XLA runs an RNN's step 3x faster than the numpy
backend and the seed MLP's 2x slower; ResNet blocks are fastest on the torch engine (oneDNN's convolutions).

The trial, per program version, feed and fetch names, and feed shapes (a ``Trial``; a changed batch size is a
new trial, so each shape runs on its own winner):

1. The first ``NUMPY_FIRST`` runs, and at least ``NUMPY_SECONDS_FIRST`` of run time, are the numpy backend's: a
   program run once or twice (a startup program), or a job shorter than a compile, is never compiled. The last of
   them that make a whole block (the first, which builds the plan, left out) are numpy's first timed block: nothing
   else runs beside them yet, so they are as settled as any later block, and the trial need not run numpy again.
2. Then each candidate prepares its step in a background thread (its runner's ``prepare``: xla compiles, torch
   imports itself and builds its steps), and the runs stay on numpy until all are ready (but for the warm runs of
   3): no run waits on a compile. A candidate whose compile fails, that cannot run the program, or that declines
   a compile that might not finish (its runner's ``declines``: xla compiles a long block in pieces, but a long
   block with control flow compiles whole) leaves the trial and the choice says why. (A runner without
   ``prepare`` compiles in its first run.)
3. ``COMPILED_WARM`` runs on each candidate, not timed (the first run after a compile still runs slower than the
   rest: the anchors' RNN 6.8, then 4.0-4.4 ms), made as soon as it is ready, beside the others' preparations
   (torch is ready seconds before xla has compiled a transformer step).
4. Blocks of timed runs on each, in turn, a block ``BLOCK_RUNS`` runs and ``BLOCK_SECONDS`` at least (the fewest
   blocks first; on a tie the one that looks fastest, by its warm run or numpy's runs, so the likely winner's
   block is in before the others'), timed from the call to the fetched arrays (less the engine's one-time
   measuring in the run, ``shared/one_time``: the torch engine's product calibration), until the fastest's times
   separate from every other's (its upper quartile below each other's lower quartile) after at least ``MIN_ROUNDS``, or
   ``MAX_ROUNDS`` rounds or ``TRIAL_SECONDS`` of timed runs have passed; the backend with the smallest median
   runs every later run. A backend whose times separate from the fastest's while others still overlap it leaves
   the contest then, and the next rounds run only the ones still in it (on the anchors' transformer, numpy at 175
   ms against xla's and torch's 100-150 ms ran a second block of five runs before). A block that follows another
   backend's, and each backend's first block, first settles for ``SETTLE_SECONDS``, in untimed runs and in the
   idle time before them (a job that pauses between steps settles in its pauses): one engine's thread pools slow
   the next one's runs for a while (numpy's OpenBLAS threads spin after a product, torch's OpenMP threads after
   an op: on LeNet a torch-engine step took 7.1 ms right after numpy steps, still 7.7 five steps later, and 3.9
   alone), and a freshly compiled step runs slower for its first few runs (a digits classifier's xla step, 0.5 ms
   steady: its three timed runs straight after the warm one lost to numpy's 0.6 ms, and auto kept numpy). A run
   that fails counts for none and is run again in the trial. A backend whose first ``CUT_RUNS`` (two) timed runs
   each take over ``CUT_RATIO`` times the slowest run of the fastest complete block leaves the contest after them
   (their times are kept for the check in 5): on ResNet blocks the xla step (260 ms) against the torch engine's (93
   ms at most) is no contest, and a block of it costs a second of runs. Two, not one: a single slow run (a full
   collection, a thread pool resized) once cut the fastest engine of the anchors' LeNet for good.
5. A choice is checked again after ``RECHECK_SECONDS`` of runs on it (``RECHECK_SECONDS_OVERLAPPING`` when the trial
   ended with the times still overlapping, or sooner when the check costs little: ``first_check_after``): settled
   blocks in turns, runner-up first, ``RECHECK_TURNS`` each; the runner-up takes over if its pooled times are
   apart from the choice's and its median at least ``RECHECK_MARGIN`` below, or if the trial's and the check's
   medians together put it ``RECHECK_MARGIN`` ahead (after a close call, a choice made on overlapping times: the
   check alone, ahead at all; ``check_overturns``).
   Another process's burst of work during the trial can make the faster engine look slower; the check puts that
   right. Each check that keeps the choice doubles the wait before the next, up to ``RECHECK_MAX_SECONDS``, so its
   cost fades (on ResNet a check runs eight numpy steps).

A trial that matches a choice an earlier process recorded (the same program, names, feed shapes, engines,
thread setting and machine: ``remembered.py``) skips the weighing: only the remembered engine prepares, before
the first run, which waits for it, when its recorded preparation was short (``RECALLED_WAIT_SECONDS``), else
after ``NUMPY_FIRST`` runs beside numpy's, and runs every run once it is ready; its runner-up prepares later, and
the checks of 5 go on from there, the first after ``RECHECK_SECONDS_REMEMBERED``. Each choice and check is
recorded for the next process (``Executor`` remembers unless ``GRADGEN_REMEMBER_CHOICES=0``).

Every backend computes the same values (float64 to 1e-12, float32 to 1e-5: tests/backends), the scope holds any
one's arrays, and a run commits only if it succeeds, so switching between runs changes nothing but the speed.
What stays on the numpy backend without a trial: programs with collective ops (every rank must run the same
engine, and their timings differ), programs whose step is all large matrix products (``backend.product_bound``:
numpy's BLAS runs them as the engines do, and weighing the engines would only hold their memory), programs every
candidate cannot run or declines (the reasons are given), and every program when no compiled backend is
installed.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Mapping, Sequence

from ..backend import WEIGHED_FOR, feed_batch, product_bound
from ..backend.shared.background import background_preparation
from ..backend.shared.one_time import spent
from .per_version import PerVersion
from .preparation_clock import PreparationClock
from .rank_runs import has_collectives
from .remembered import recall, remember, trial_key
from .scope import Scope
from .trial import Trial

__all__ = ["AutoRunner", "LazyRunner"]

_PREPARATION = "gradgen-auto-compile-"
"""The name of each background preparation's thread, less the engine's name."""


def _preparation_threads() -> set[int]:
    """The native ids of the background preparations running now (each one's clock leaves the others' CPU out)."""
    return {thread.native_id for thread in threading.enumerate() if thread.name.startswith(_PREPARATION)}


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

    def prepare(self, program, feed: Mapping[str, Any], fetch_names: Sequence[str], scope: Scope) -> float | None:
        return self.made().prepare(program, feed, fetch_names, scope)

    def declines(self, program) -> str | None:
        declines = getattr(self.made(), "declines", None)
        return declines(program) if declines is not None else None

    def run(self, *args) -> list:
        return self.made().run(*args)


class AutoRunner:
    """One executor's runs with ``backend="auto"``: the numpy runner, the compiled ones (a runner, a list of them,
    or None when none is installed), and a Trial per program version, names and feed shapes. ``chose(program,
    backend, reason)`` is told of each choice (the executor's profile shows it); ``numpy_only()`` says why the
    executor's settings keep every run on numpy, or None. With ``remember``, each trial starts from the choice an
    earlier process recorded for the same program and settings (``threads``), and records its own
    (``remembered.py``)."""

    def __init__(self, numpy_runner, compiled_runners, chose: Callable[[Any, str, str], None],
                 clock: Callable[[], float] = time.perf_counter, numpy_only: Callable[[], str | None] = lambda: None,
                 remember: bool = False, threads: int | None = None):
        if compiled_runners is None:
            compiled_runners = []
        elif not isinstance(compiled_runners, (list, tuple)):
            compiled_runners = [compiled_runners]
        self.runners = {"numpy": numpy_runner, **{found.name: found for found in compiled_runners}}
        self.compiled_names = [found.name for found in compiled_runners]
        self._chose, self._clock, self._numpy_only = chose, clock, numpy_only
        self._remember, self._threads = remember, threads
        self._trials = PerVersion()

    def trial(self, program, feed: Mapping[str, Any], fetch_names: Sequence[str]) -> Trial:
        """The Trial of ``program``'s present version for these names and feed shapes (a new one after the
        program changed)."""
        per_program = self._trials.entries(program)
        shapes = _feed_shapes(feed)
        key = (tuple(sorted(feed)), tuple(fetch_names), shapes)
        found = per_program.get(key)
        if found is None:
            background = {name: hasattr(self.runners[name], "prepare") for name in self.compiled_names}
            batch = feed_batch(feed)
            stays = self._stays_on_numpy(program, batch)
            left_out = self._left_out(program, background, batch) if stays is None else {}
            record_key, remembered = None, None
            if self._remember and stays is None:
                engines = ["numpy", *(name for name in self.compiled_names if name not in left_out)]
                record_key = trial_key(program, dict(shapes), fetch_names, engines, self._threads)
                remembered = recall(record_key, engines)
            found = Trial(self.compiled_names, stays, background, remembered, record_key)
            for name, why in left_out.items():
                found.drop(name, why)
            per_program[key] = found
            self._tell(program, found)
        return found

    def _tell(self, program, trial: Trial) -> None:
        """Tell the executor of the trial's choice, once, and record a new choice or check for later processes."""
        if trial.chosen is not None and not trial.told:
            trial.told = True
            self._chose(program, trial.chosen, trial.reason)
            if trial.record_due and trial.record_key is not None:
                trial.record_due = False
                remember(trial.record_key, trial.record())

    def _stays_on_numpy(self, program, batch: int) -> str | None:
        """Why ``program`` (run at leading dim ``batch``) runs on numpy without a trial, whatever the compiled
        backends, or None."""
        if not self.compiled_names:
            return "no compiled backend is installed (pip install 'gradgen[xla]')"
        pinned = self._numpy_only()
        if pinned:
            return pinned
        if has_collectives(program.global_block()):
            return "a data-parallel program: every rank must run the same backend"
        return product_bound(program.global_block(), batch)

    def _left_out(self, program, background: Mapping[str, bool], batch: int) -> dict[str, str]:
        """The compiled backends that sit ``program``'s trial out, and why: one weighed only for some programs
        (``backend.WEIGHED_FOR``, at this run's leading dim ``batch``) where this is not one; one without a
        background ``prepare`` (it compiles in its first run) that cannot run the program or declines it, asked
        now (a backend with ``prepare`` is asked in the background, where its import costs no run)."""
        out: dict[str, str] = {}
        for name in self.compiled_names:
            why_left_out = WEIGHED_FOR.get(name)
            why = why_left_out(program.global_block(), batch) if why_left_out else None
            if why:
                out[name] = why
                continue
            if not background[name]:
                why = self._cannot_run(name, program)
                if why:
                    out[name] = why
        return out

    def _cannot_run(self, name: str, program) -> str | None:
        """Why backend ``name`` leaves ``program``'s trial: ops it cannot run, or a compile it declines because it
        might not finish (its runner's ``declines``), or None."""
        runner = self.runners[name]
        problems = runner.problems(program.global_block())
        if problems:
            return f"{name} cannot run it: " + "; ".join(problems)
        declines = getattr(runner, "declines", None)
        return declines(program) if declines is not None else None

    def _start_compiles(self, trial: Trial, program, feed: Mapping[str, Any], fetch_names: Sequence[str],
                        scope: Scope) -> None:
        """Compile the step of each candidate whose compile is due, each in a background thread; the trial hears
        when each is done."""
        for name in trial.start_due():
            self._start_compile(trial, name, program, dict(feed), list(fetch_names), scope)

    def _start_compile(self, trial: Trial, name: str, program, feed: dict, fetch_names: list,
                       scope: Scope) -> threading.Thread:
        compiled = self.runners[name]

        def work() -> None:
            clock, kept = PreparationClock(_preparation_threads), 0.0
            try:
                with background_preparation():  # (its imports would otherwise wait out every switch interval)
                    why_not = self._cannot_run(name, program)
                    if why_not is None:
                        kept = compiled.prepare(program, feed, fetch_names, scope) or 0.0
            except Exception as e:  # noqa: BLE001 - any failure leaves the backend out of the trial, with the reason
                message = str(e).splitlines()[0] if str(e) else ""
                why_not = f"{name} could not compile it: {type(e).__name__}: {message}"
            trial.compiled(name, why_not, clock.seconds(), kept, alone=clock.alone())

        # Not a daemon: a process that ends mid-compile waits for it (a daemon thread killed inside XLA's C++
        # compiler aborts the process: "FATAL: exception not rethrown"). Compiles that could take long are
        # declined (the runner's ``declines``).
        thread = threading.Thread(target=work, name=f"{_PREPARATION}{name}", daemon=False)
        thread.start()
        return thread

    def run(self, program, feed: Mapping[str, Any], fetch_names: Sequence[str], scope: Scope, return_numpy: bool,
            mark: Callable[[str], None], built: Callable[[float], None], agreed: Callable[[], None]) -> list:
        """One run on the backend the program's trial names (``runtime/executor``'s runner contract)."""
        trial = self.trial(program, feed, fetch_names)
        first = trial.prepare_first()
        if first is not None:  # (a remembered engine that prepares quickly: this run waits for it, within a bound)
            name, longest = first
            self._start_compile(trial, name, program, dict(feed), list(fetch_names), scope).join(longest)
        backend = trial.next_backend()
        self._start_compiles(trial, program, feed, fetch_names, scope)
        start, measuring = self._clock(), spent()
        try:
            out = self.runners[backend].run(program, feed, fetch_names, scope, return_numpy, mark, built, agreed)
        except BaseException:
            trial.failed(self._clock())
            raise
        ended = self._clock()
        trial.ran(backend, max(0.0, ended - start - (spent() - measuring)), ended)  # less one-time measuring
        self._tell(program, trial)
        return out
