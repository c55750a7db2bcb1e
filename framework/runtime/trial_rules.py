"""The thresholds of ``backend="auto"``'s trial (``trial.py`` keeps its bookkeeping, ``auto_run.py`` tells the
whole story), each with the measurement behind it, and the three judgements made with them: when a block of
timed runs is whole, when two engines' times lie apart, and how long a choice runs before its first check."""
from __future__ import annotations

import statistics
from typing import Sequence

__all__ = ["BLOCKS_TO_PART", "BLOCK_RUNS", "BLOCK_SECONDS", "CHECK_SHARE", "COMPILED_WARM", "CUT_RATIO", "CUT_RUNS",
           "MAX_ROUNDS", "MIN_ROUNDS", "NUMPY_FIRST", "NUMPY_SECONDS_FIRST", "PART_RATIO", "RECALLED_WAIT_SECONDS",
           "RECHECK_MARGIN", "RECHECK_MAX_SECONDS", "RECHECK_SECONDS", "RECHECK_SECONDS_OVERLAPPING",
           "RECHECK_SECONDS_REMEMBERED", "RECHECK_TIE", "RECHECK_TURNS", "SETTLE_SECONDS", "TRIAL_SECONDS",
           "check_overturns", "first_check_after", "full_block", "parted", "recalled_wait", "separated"]

NUMPY_FIRST = 2
"""Runs a program makes on the numpy backend before the compiled backend is tried."""

NUMPY_SECONDS_FIRST = 1.0
"""Seconds of runs a program spends on numpy before the compiled backends are tried: a job shorter than that
never pays for a compile, as a ski renter buys only after renting about the price. The price: the compiled
engines' preparation (jax's import, the trace and the compile: ~1 s of a core for a digits CNN) shares the
interpreter lock with the numpy runs beside it, which run at half speed meanwhile, and the trial's blocks follow
(tests/bench/partial_batch.py, 1.9 s added in all). Measured there, job on numpy / default: 0.87 s / 2.1 s with
0.5 here, 0.85 s with 1.0; a 1.7 s job 2.9 s with either, 1.7 with 2.0. A long job pays the wait once, at most
(1 - compiled / numpy step) of it."""

RECALLED_WAIT_SECONDS = 5.0
"""A remembered engine (``remembered.py``) whose preparation would take at most this long alone, as the process that
recorded it measured it (``preparation_clock``), less the compiles XLA's persistent cache kept
(``Remembered.prepare_seconds``), prepares before the program's first run, which waits for it (``recalled_wait``),
instead of after ``NUMPY_FIRST`` runs with numpy's runs beside it. The earlier process ran the program long enough
to choose, so this one likely will too, and a preparation beside numpy's runs is slow for both: they share the
interpreter lock (``import jax`` unmarshals its modules holding it for 0.2-0.5 s at a time). Measured with the
anchors' harness, which sizes each system's rounds by a step timed after eight warm-up steps: beside the preparation
the RNN's numpy steps took 72-150 ms (11 alone) and the preparation 1.36 s, so its rounds were 3-7 steps (the
default 1.07-1.23x JAX); waiting, the first step took 0.81 s (preparation 0.75 s), the step timed 4.75 ms, and the
default ran 3.68 ms against JAX's 3.70 and gradgen@xla's 3.65. LeNet on torch: preparation 3.21 s beside numpy's
steps, 1.80 s waiting (first step 2.01 s), then gradgen@torch's 6.25 ms steps from the first round. A first run
waits 10.5 s at most (``recalled_wait``); what a preparation takes is recorded anew each time."""

COMPILED_WARM = 1
"""Untimed runs on the compiled backend after its compile, before its timed ones."""

MIN_ROUNDS = 3
"""Timed runs on each backend before a choice may be made."""

PART_RATIO = 1.5
"""How many times one backend's median run must be another's for their times, apart, to part them after one block
each (``BLOCKS_TO_PART``): the slow starts a block's settling leaves in (1.2-1.5x on this machine's first steps
after a pause) stay under it; the seed MLPs' numpy and xla (1.2-1.3x) and the transformer's torch and xla (1.1x)
then take a second round."""

BLOCKS_TO_PART = 2
"""Whole blocks each backend in the contest has run, at different moments in turns, before their times may count as
apart (``parted``: a clear choice, or a backend leaving the contest for being clearly behind), unless one median is
``PART_RATIO`` times the other: one block each is one moment each, which a burst of other work or the engine run
just before can tilt. Measured (``tests/bench/choice.py``, the transformer, 10 fresh processes): with one block
each, one trial met xla at 96.8 ms and torch at 107, "apart", and chose xla; its check 2 s later met torch at 88.6
and xla at 97.6, not enough to overturn a clear choice, and the process ran xla 16 % slower than torch from then
on (89 ms against 77)."""

BLOCK_RUNS = 3
"""Timed runs a backend makes in a row in the trial (a choice is made only between blocks), at least."""

BLOCK_SECONDS = 0.05
"""Timed run time a block spends, at least (it makes ``BLOCK_RUNS`` runs or more): three runs of a sub-millisecond
step take a millisecond or two, which one burst of other work covers whole. Measured with blocks of three runs
(``tests/bench/choice.py``, 10 fresh processes each): the seed MLPs picked xla in 3 of 20 processes where numpy
ran 15-20 % faster (0.55 against 0.67 ms)."""

SETTLE_SECONDS = 0.2
"""Settling a block needs first when the run before it was another backend's, or when it is its backend's first:
the previous engine's pool threads spin for a while after its work (OpenBLAS's about 0.1 s), and a fresh compiled
step's first runs are slow. Untimed runs of the block count, and so does the idle time before them (the caller
sleeping, or waiting on its data): the pools stop spinning then too. A job that runs one step at a time with
pauses between (the anchors' harness: one transformer step a round) settles in its pauses rather than in steps
the trial would not time."""

CUT_RATIO = 2.0
"""A backend whose first ``CUT_RUNS`` timed runs in a block are each over this many times the slowest run of the
fastest complete block leaves the contest at once. Noise only slows runs, so a cut backend was at least this much
slower for those runs; the settling before them takes out the known slow starts (pool threads of the engine before:
1.8x on LeNet; a fresh compiled step: 1.7x on the RNN)."""

CUT_RUNS = 2
"""Timed runs a block makes before its backend can be cut (``CUT_RATIO``): two, so that one slow run alone (a full
collection, a thread pool resized, another process's burst) does not cut an engine, which then never runs again in
the process, and whose one run a record would keep for later ones. Measured: with one run, one of the remembered
choices made for the anchors' LeNet (``tests.bench.remember_choices``, 2026-12-02 17:04) kept a single torch run of
139 ms as torch's time and chose xla at 12.3 ms a step, where 23 trials in fresh processes after it chose torch
at 5.1-7.2 ms; a second run costs a backend so far behind one run more (ResNet's numpy: ~0.5 s)."""

MAX_ROUNDS = 15
"""Timed runs on each backend after which the smaller median wins even if the times still overlap."""

TRIAL_SECONDS = 2.0
"""Timed seconds (both backends) after which the smaller median wins, once ``MIN_ROUNDS`` are in."""

RECHECK_SECONDS = 20.0
"""Run time on the chosen backend before the choice is first checked again against the runner-up."""

RECHECK_SECONDS_OVERLAPPING = 2.0
"""Run time on a choice made while its times still overlapped the runner-up's (after ``MAX_ROUNDS`` or
``TRIAL_SECONDS``: a close call) before its first check: the trial's two seconds on a 2-core machine can catch
one engine slower than it runs later (LeNet's trial: xla 9.26 ms, torch 9.38, overlapping, xla chosen; the same
process's later rounds: 7.95 and 6.69)."""

RECHECK_SECONDS_REMEMBERED = 120.0
"""Run time on a remembered choice (``remembered.py``) before its first check; its runner-up prepares halfway. An
earlier process's trial or checks weighed the two, and this check has a price the trial's checks do not: the
runner-up's preparation, beside the runs, takes a core (``background.preparations``) while it compiles. With 20
s (the runner-up compiling after 10), the anchors' transformer on a remembered torch engine ran its rounds at
188-260 ms while xla compiled, against 117-131 before and after (the torch engine on one thread, as torch1 runs),
inside the harness's ten seconds a system. Waiting 60 s puts that cost (a few seconds of runs at one thread) under
a twentieth of the runs before it."""

RECHECK_MAX_SECONDS = 640.0
"""The longest wait between two checks (the wait doubles after each check that keeps the choice)."""

RECHECK_MARGIN = 0.10
"""How much faster (median) the runner-up must be to overturn a choice made on times apart: in a check whose times
lie apart, or in the measurement before and the check together (``check_overturns``). A choice made on
overlapping times is a close call: any lead in its check over a tie (``RECHECK_TIE``) overturns it."""

RECHECK_TIE = 0.04
"""A lead this small in a check after a close call is a tie, and a tie keeps the choice. Measured with
``tests/bench/choice.py`` (seed MLPs, fresh processes, the check's times overlapping each time), the lead the check
met and how the bench's later rounds ran the two:
- 1 % (xla 0.817 ms, numpy 0.826): moved to xla, which then ran 15 % slower (2026-12-02, 03:58 on);
- 2.8 % (xla 1.05, numpy 1.08): moved to xla, which then ran 17 % slower (0.88 against 1.03; 2026-12-02, 07:05 on);
- 5.4 % (numpy 0.773, xla 0.817): moved to numpy, and xla then ran 12 % slower (2026-12-01): right.
A check's two blocks an engine on this VM spread 5-15 %, so a lead under 4 % says nothing the trial did not; the
LeNet close call of ``check_overturns``' docstring met a 7.8 % lead."""

CHECK_SHARE = 0.10
"""The most a choice's first check may cost (the runner-up's runs in it, less what the choice would have taken for
them), as a share of the run time on the choice before it (``first_check_after``): a clear choice between close
engines with short steps is checked after a few seconds, not ``RECHECK_SECONDS`` (a seed f64 trial measured
numpy 0.90 ms and xla 0.79, apart; the same process later ran them at 0.69 and 1.06), while ResNet's check
(~2 s of slower runs) still waits its 20. With 0.05, a seed f64 trial that chose xla apart (numpy 1.29 ms, xla
0.738) waited 7.5 s for its check, and ran xla 21 % slower than numpy (0.68 against 0.56 ms) for the 6 s the
choice bench watches; with 0.10 the check comes after 3.7 s (each later check waits twice as long as the one
before, so their cost fades as before)."""

RECHECK_TURNS = 2
"""Blocks each engine runs in a check, in turns (runner-up, choice, runner-up, ...); their times are pooled. With
one block each, one check in ten fresh LeNet processes (``tests/bench/choice.py``) moved a right choice to the
slower engine: a block of five runs met xla at 6.75 ms and torch at 10.3, where both ran 9-10 ms before and after."""


def first_check_after(chosen: float, runner_up: float, clear: bool) -> float:
    """Run time on a choice before its first check, from the two engines' median runs: ``RECHECK_SECONDS_OVERLAPPING``
    after a close call; after a clear one, what keeps the check's cost within ``CHECK_SHARE`` of the runs before
    it, between ``RECHECK_SECONDS_OVERLAPPING`` and ``RECHECK_SECONDS``."""
    if not clear:
        return RECHECK_SECONDS_OVERLAPPING
    per_turn = max(SETTLE_SECONDS, runner_up) + max(BLOCK_SECONDS, BLOCK_RUNS * runner_up)
    extra = RECHECK_TURNS * per_turn * max(0.0, runner_up / chosen - 1.0)
    return min(RECHECK_SECONDS, max(RECHECK_SECONDS_OVERLAPPING, extra / CHECK_SHARE))


def recalled_wait(recorded: float) -> float:
    """The longest a first run waits for a remembered engine whose preparation took ``recorded`` seconds before:
    twice that (a cache emptied since makes it compile afresh), then the runs go on on numpy beside it."""
    return 2.0 * recorded + 0.5


def check_overturns(before: float | None, check: float, apart: bool, close_call: bool) -> bool:
    """Whether a check moves the choice to the runner-up. ``before`` and ``check`` are the runner-up's median run
    over the choice's, in the measurement before this check (the trial, or the previous check; None when unknown)
    and in this check; ``apart`` whether the check's times lie apart; ``close_call`` whether the choice was made on
    overlapping times. A check whose times lie apart with the runner-up's median ``RECHECK_MARGIN`` below overturns
    any choice. After a close call the check alone decides: the runner-up takes over if its median is below the
    choice's by more than a tie (``RECHECK_TIE``; the trial could not tell the two apart, and its first seconds are
    the biased ones: numpy's first second runs slow, xla's right after its compile). After a clear choice the two
    measurements weigh alike, by the geometric mean of their ratios: the runner-up takes over when together they put
    it ``RECHECK_MARGIN`` ahead.

    Measured (``tests/bench/choice.py``, fresh processes): requiring a check's times apart after a close call kept a
    seed f64 choice of xla made overlapping (numpy 1.26 ms, xla 1.03) after a check met numpy at 0.82 and xla at
    1.13; it ran xla 30 % slower from then on. Requiring the check's median ``RECHECK_MARGIN`` below instead kept a
    LeNet choice of xla made overlapping (7.77 ms, torch 7.81) after a check met torch at 9.87 and xla at 10.7; the
    bench's rounds then ran torch 9.45, xla 10.41. Requiring the check alone apart after a clear choice kept a seed
    f32 choice of xla made apart (numpy 0.725 ms, xla 0.626) after a check met numpy at 0.548 and xla at 0.844,
    overlapping; the bench's rounds then ran xla 13 % slower (0.83 against 0.73). Weighing the trial alike after a
    close call kept a seed f32 choice of xla made overlapping (numpy 0.792 ms, xla 0.574: the trial's numpy runs
    slowed) after a check met numpy at 0.468 and xla at 0.572, apart; the bench's rounds then ran xla 21 % slower;
    and (2026-12-01) a seed f64 choice of xla made overlapping (numpy 1.03 ms, xla 0.895) after a check met numpy at
    0.773 and xla at 0.817, overlapping (together 1.09: kept); the bench's rounds then ran xla 12 % slower (0.85
    against 0.76): 1 wrong pick in 60. The check alone decides each of these close calls right."""
    if apart and check < 1.0 - RECHECK_MARGIN:
        return True
    if close_call:
        return check < 1.0 - RECHECK_TIE
    together = (1.0 if before is None else before) * check
    return together < (1.0 - RECHECK_MARGIN) ** 2


def parted(blocks: int, fast: float, slow: float) -> bool:
    """Whether two backends whose run times lie apart (``separated``) after ``blocks`` whole blocks each, with
    medians ``fast`` and ``slow``, are apart for the trial (``BLOCKS_TO_PART``)."""
    return blocks >= BLOCKS_TO_PART or slow >= PART_RATIO * fast


def full_block(runs: int, seconds: float) -> bool:
    """Whether ``runs`` timed runs that took ``seconds`` in all make a whole block: ``BLOCK_RUNS`` runs and
    ``BLOCK_SECONDS`` at least."""
    return runs >= BLOCK_RUNS and seconds >= BLOCK_SECONDS


def separated(fast: Sequence[float], slow: Sequence[float]) -> bool:
    """Whether the run times ``fast`` are clearly below ``slow``: its upper quartile under the other's lower one."""
    upper = statistics.quantiles(fast, n=4, method="inclusive")[2]
    lower = statistics.quantiles(slow, n=4, method="inclusive")[0]
    return upper < lower
