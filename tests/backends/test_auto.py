"""``Executor(backend="auto")``: the trial's order and choice (with stand-in runners and a fake clock; its checks
are ``test_auto_checks``), the background compile, a trial per feed shape, the programs that stay on numpy and why,
the same training as the numpy backend, a fresh trial after an edit, and the choice in the profile and on the
command line."""
from __future__ import annotations

import sys
import threading
import time

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, optimizer
from gradgen.framework.errors import ExecutionError
from gradgen.framework.runtime import trial_rules
from gradgen.framework.runtime.auto_run import AutoRunner
from gradgen.framework.runtime.trial_rules import (BLOCK_RUNS, COMPILED_WARM, MAX_ROUNDS, MIN_ROUNDS, NUMPY_FIRST,
                                             SETTLE_SECONDS)
from gradgen.framework.runtime.place import CUDAPlace
from gradgen.framework.tools.cli import main
from gradgen.framework.tools.profile_text import profile_text
from gradgen.program import Program, layers, program_guard
from tests.backends.xla_harness import need_jax


@pytest.fixture(autouse=True)
def _trial_from_the_third_run(monkeypatch):
    """The trials below start at the third run whatever the runs cost (the run-time threshold has its own test),
    run whole blocks however far apart the costs (the cut after ``CUT_RUNS`` runs has its own tests), and blocks of
    ``BLOCK_RUNS`` runs however short (the least block time has its own test)."""
    monkeypatch.setattr(trial_rules, "NUMPY_SECONDS_FIRST", 0.0)
    monkeypatch.setattr(trial_rules, "CUT_RATIO", float("inf"))
    monkeypatch.setattr(trial_rules, "BLOCK_SECONDS", 0.0)


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _StandIn:
    """A runner that advances the fake clock by its own cost per run and remembers the runs it made."""

    def __init__(self, name: str, clock: _Clock, cost: float, log: list, fail_on: set[int] = frozenset(),
                 problems=lambda block: []):
        self.name, self.clock, self.cost, self.log, self.fail_on = name, clock, cost, log, fail_on
        self.problems = problems

    def run(self, program, feed, fetch_names, scope, return_numpy, mark, built, agreed):
        self.log.append(self.name)
        self.clock.now += self.cost
        if len(self.log) in self.fail_on:
            raise ExecutionError(f"run {len(self.log)} failed")
        return [self.name]


def _program() -> Program:
    main_program, startup = Program(), Program()
    with program_guard(main_program, startup):
        x = layers.data("x", [-1, 4], "float64")
        layers.reduce_mean(layers.fc(x, 2, name="fc"), name="loss")
    return main_program


def _auto(numpy_cost: float, compiled_cost: float, problems=lambda block: [], fail_on=frozenset()):
    clock, log, told = _Clock(), [], []
    runner = AutoRunner(_StandIn("numpy", clock, numpy_cost, log, fail_on),
                        _StandIn("xla", clock, compiled_cost, log, fail_on, problems),
                        lambda program, backend, reason: told.append((backend, reason)), clock)
    return runner, log, told


def _runs(runner, program, n: int, feed=None) -> None:
    for _ in range(n):
        try:
            runner.run(program, feed or {"x": np.zeros((2, 4))}, ["loss"], None, True, None, None, None)
        except ExecutionError:
            pass


INLINE_WARM = COMPILED_WARM + 1
"""A runner without ``prepare`` compiles in its first run: that run is untimed too."""

assert MIN_ROUNDS == BLOCK_RUNS  # (the schedules below: one round of blocks is the least trial)


def blocks(costs: list[tuple[str, float]], after: str, first: bool = True, timed: int = BLOCK_RUNS) -> list[str]:
    """The runs of one round of the trial's blocks, in order, the run before them on ``after``: a block whose
    backend differs from the run before it, or (``first``) the first block of its backend, first settles (untimed
    runs until they took SETTLE_SECONDS, at least one), then makes ``timed`` timed runs (a cut block: ``CUT_RUNS``)."""
    runs, last = [], after
    for name, cost in costs:
        spent = 0.0 if name != last or first else SETTLE_SECONDS
        while spent < SETTLE_SECONDS:
            runs.append(name)
            spent += cost
        runs += [name] * timed
        last = name
    return runs


@pytest.mark.parametrize("numpy_cost,compiled_cost,want", [(1.0, 0.2, "xla"), (0.2, 1.0, "numpy"),
                                                           (0.5, 0.5, "numpy")])
def test_the_trial_runs_numpy_first_then_both_in_turn_and_keeps_the_faster(numpy_cost, compiled_cost, want):
    runner, log, told = _auto(numpy_cost, compiled_cost)
    program = _program()
    looks_faster_first = sorted([("xla", compiled_cost), ("numpy", numpy_cost)], key=lambda b: (b[1], b[0] != "numpy"))
    trial = blocks(looks_faster_first, after="xla")  # by numpy's second run and xla's warm one; a tie: numpy
    warm = NUMPY_FIRST + INLINE_WARM
    trial_runs = warm + len(trial)
    _runs(runner, program, trial_runs - 1)
    assert told == []  # still trying
    _runs(runner, program, 1 + 4)
    assert log[:NUMPY_FIRST] == ["numpy"] * NUMPY_FIRST and log[NUMPY_FIRST:warm] == ["xla"] * INLINE_WARM
    assert log[warm:trial_runs] == trial  # in blocks; numpy's settles after xla's runs
    assert log[trial_runs:] == [want] * 4  # a tie goes to numpy: nothing to compile
    assert len(told) == 1 and told[0][0] == want
    assert f"numpy {numpy_cost * 1e3:.3g} ms" in told[0][1] and f"xla {compiled_cost * 1e3:.3g} ms" in told[0][1]


def test_numpys_runs_before_the_compiles_are_its_first_block(monkeypatch):
    """The last BLOCK_RUNS of numpy's first runs (its first, the plan's build, left out) are its timed block: the
    trial then runs only xla's."""
    monkeypatch.setattr(trial_rules, "NUMPY_FIRST", BLOCK_RUNS + 2)
    runner, log, told = _auto(0.0, 0.5)
    runner.runners["numpy"].run = _noisy(runner.runners["numpy"], iter([4.0, 3.0] + [1.0] * 100))
    program = _program()
    trial = blocks([("xla", 0.5)], after="xla")
    _runs(runner, program, BLOCK_RUNS + 2 + INLINE_WARM + len(trial) + 2)
    assert log == ["numpy"] * (BLOCK_RUNS + 2) + ["xla"] * (INLINE_WARM + len(trial) + 2)
    assert told[0][0] == "xla" and "numpy 1e+03 ms" in told[0][1] and "xla 500 ms" in told[0][1]


def test_a_pause_before_a_block_settles_it():
    """A job that pauses between its runs (the anchors' harness runs one step a round) settles each block in its
    pauses: with ``SETTLE_SECONDS`` of idle time before every run, the trial's blocks start timing at once, so it
    takes the untimed settling runs fewer than the same job run back to back, and chooses the same."""
    chosen_after = {}
    for pause in (0.0, SETTLE_SECONDS):
        runner, log, told = _auto(1.0, 0.25)
        clock, program = runner.runners["numpy"].clock, _program()
        while not told:
            clock.now += pause
            _runs(runner, program, 1)
        chosen_after[pause] = len(log)
        assert told[0][0] == "xla"
    warm = NUMPY_FIRST + INLINE_WARM
    settling = len(blocks([("xla", 0.25), ("numpy", 1.0)], after="xla")) - 2 * BLOCK_RUNS
    assert settling > 0 and chosen_after[0.0] == warm + 2 * BLOCK_RUNS + settling
    assert chosen_after[SETTLE_SECONDS] == warm + 2 * BLOCK_RUNS


def test_a_failed_trial_run_counts_for_neither_and_is_tried_again():
    first_timed = NUMPY_FIRST + INLINE_WARM + 1
    runner, log, told = _auto(1.0, 0.2, fail_on={first_timed})  # the first timed xla run fails
    program = _program()
    _runs(runner, program, NUMPY_FIRST + INLINE_WARM + len(blocks([("xla", 0.2), ("numpy", 1.0)], after="xla")))
    assert told == []  # one run short
    _runs(runner, program, 1)
    assert told and told[0][0] == "xla"
    assert log[first_timed - 1] == log[first_timed] == "xla"  # run again on the same backend


def test_a_program_twice_run_is_never_compiled_and_an_edit_starts_a_new_trial():
    runner, log, told = _auto(1.0, 0.2)
    program, other = _program(), _program()
    _runs(runner, other, 2)
    assert log == ["numpy", "numpy"]
    _runs(runner, program, 20)
    assert told[-1][0] == "xla"
    with program_guard(program, Program()):
        layers.scale(program.global_block().var("loss"), 2.0)
    log.clear()
    _runs(runner, program, NUMPY_FIRST)
    assert log == ["numpy"] * NUMPY_FIRST


def test_programs_the_compiled_backend_cannot_run_stay_on_numpy_and_say_why():
    runner, log, told = _auto(1.0, 0.2, problems=lambda block: ["block 0, op #0 (my_op): no lowering"])
    _runs(runner, _program(), 5)
    assert log == ["numpy"] * 5
    assert told == [("numpy", "xla cannot run it: block 0, op #0 (my_op): no lowering")]


def test_data_parallel_programs_stay_on_numpy():
    runner, log, told = _auto(1.0, 0.2)
    program = _program()
    block = program.global_block()
    loss = block.var("loss")
    block.append_op("broadcast", {"X": [loss.name]}, {"Out": [loss.name]}, {"root": 0})
    _runs(runner, program, 4)
    assert log == ["numpy"] * 4 and told[0][0] == "numpy" and "every rank" in told[0][1]


def test_without_a_compiled_backend_every_program_stays_on_numpy():
    clock, log, told = _Clock(), [], []
    runner = AutoRunner(_StandIn("numpy", clock, 1.0, log), None,
                        lambda program, backend, reason: told.append((backend, reason)), clock)
    _runs(runner, _program(), 12)
    assert log == ["numpy"] * 12 and "no compiled backend" in told[0][1]


def _trained(backend: str, steps: int = 14, profile: bool = False):
    rng = np.random.default_rng(3)
    main_program, startup = Program(), Program()
    with program_guard(main_program, startup):
        x = layers.data("x", [-1, 6], "float64")
        y = layers.data("y", [-1, 1], "float64")
        h = layers.fc(x, 16, act="tanh", name="h")
        loss = layers.reduce_mean(layers.square(layers.fc(h, 1, name="p") - y), name="loss")
        optimizer.SGD(0.05).minimize(loss)  # (contracting near its minimum: the engines' last-bit differences
    exe, scope = Executor(backend=backend, profile=profile), Scope()  # shrink, where Adam's grew over the trial)
    exe.run(startup, scope=scope)
    feed = {"x": rng.standard_normal((256, 6)), "y": rng.standard_normal((256, 1))}  # more rows than parameters
    losses, start = [], time.monotonic()
    while len(losses) < steps or (backend == "auto" and exe.backend_choice(main_program) is None):
        losses.append(exe.run(main_program, feed=feed, fetch_list=[loss], scope=scope)[0])
        if time.monotonic() - start > 120:  # the compile runs beside the steps (and may first import jax)
            raise AssertionError(f"auto made no choice in 120 s ({len(losses)} runs)")
    params = {p.name: np.array(scope[p.name]) for p in main_program.global_block().all_parameters()}
    return losses, params, exe, main_program


def test_auto_trains_as_the_numpy_backend_and_says_what_it_chose():
    need_jax()
    got_losses, got_params, exe, program = _trained("auto", profile=True)  # until it has chosen
    want_losses, want_params, _, _ = _trained("numpy", steps=len(got_losses))
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-12, atol=1e-14)
    for name, value in want_params.items():
        np.testing.assert_allclose(got_params[name], value, rtol=1e-12, atol=1e-14, err_msg=name)
    backend, reason = exe.backend_choice(program)
    assert backend in ("numpy", "xla", "torch") and "median run" in reason
    assert f"backend: auto chose {backend} (median run" in profile_text(program, exe.profile(program))
    profile = exe.profile(program)  # every run counted by its pool's threads, the trial's compiled runs too
    assert sum(runs for _, runs in profile.threads) == profile.runs
    assert Executor().backend_choice(program) == ("numpy", "chosen by the caller")


def test_auto_refuses_a_gpu_place():
    with pytest.raises(ExecutionError, match="backend='xla'"):
        Executor(CUDAPlace(0), backend="auto")


def test_the_command_line_runs_auto_and_profiles_the_choice(tmp_path, capsys):
    need_jax()
    # enough steps (about a millisecond each) for a jax import and the compile beside them (2-3 s) and the trial
    assert main(["example", "mlp", "--steps", "6000", "--backend", "auto", "--profile", "--quiet",
                 "--out", str(tmp_path / "out")]) == 0
    assert "backend: auto chose " in capsys.readouterr().out


class _Preparing(_StandIn):
    """A compiled stand-in whose ``prepare`` (the background compile) waits for ``go`` and may fail."""

    def __init__(self, *args, fails: bool = False, **kw):
        super().__init__(*args, **kw)
        self.go, self.done, self.fails, self.prepared = threading.Event(), threading.Event(), fails, []
        self.started = threading.Semaphore(0)

    def prepare(self, program, feed, fetch_names, scope):
        self.prepared.append(tuple(np.shape(feed["x"])))
        self.started.release()
        try:
            assert self.go.wait(10)
            if self.fails:
                raise ExecutionError("RESOURCE_EXHAUSTED: out of memory while compiling")
        finally:
            self.done.set()


def _auto_preparing(numpy_cost: float, compiled_cost: float, fails: bool = False):
    clock, log, told = _Clock(), [], []
    compiled = _Preparing("xla", clock, compiled_cost, log, fails=fails)
    runner = AutoRunner(_StandIn("numpy", clock, numpy_cost, log), compiled,
                        lambda program, backend, reason: told.append((backend, reason)), clock)
    return runner, compiled, log, told


def test_runs_stay_on_numpy_while_the_compiled_backend_compiles_in_the_background():
    runner, compiled, log, told = _auto_preparing(1.0, 0.25)
    program = _program()
    _runs(runner, program, NUMPY_FIRST + 7)  # the compile was started by the third run and has not finished
    assert compiled.started.acquire(timeout=10)
    assert log == ["numpy"] * (NUMPY_FIRST + 7) and compiled.prepared == [(2, 4)] and told == []
    compiled.go.set()
    assert compiled.done.wait(10)
    time.sleep(0.05)  # the thread marks the trial ready after prepare returns
    log.clear()
    trial = blocks([("xla", 0.25), ("numpy", 1.0)], after="xla")  # 0.25: exact sums on the fake clock
    _runs(runner, program, COMPILED_WARM + len(trial) + 2)
    assert log[:COMPILED_WARM] == ["xla"] * COMPILED_WARM  # no compiling run: prepare did it
    assert log[COMPILED_WARM:COMPILED_WARM + len(trial)] == trial
    assert log[-2:] == ["xla", "xla"] and told[0][0] == "xla" and "apart" in told[0][1]


def test_the_background_compile_runs_with_a_short_switch_interval_and_gives_the_old_one_back():
    """Its imports wait for the interpreter lock after every file they read: at the default 5 ms interval, beside
    runs that hold the lock, ``import jax`` had not finished after 10 s of a 1,010-op chain's runs."""
    from gradgen.framework.backend.shared.background import BACKGROUND_SWITCH_SECONDS

    runner, compiled, log, told = _auto_preparing(1.0, 0.25)
    seen = []
    prepare = compiled.prepare
    compiled.prepare = lambda *args: seen.append(sys.getswitchinterval()) or prepare(*args)
    before = sys.getswitchinterval()
    _runs(runner, _program(), NUMPY_FIRST + 1)
    compiled.go.set()
    assert compiled.done.wait(10)
    time.sleep(0.05)
    assert seen == [pytest.approx(min(before, BACKGROUND_SWITCH_SECONDS))]
    assert sys.getswitchinterval() == pytest.approx(before)


def test_a_compile_that_fails_in_the_background_leaves_the_program_on_numpy_and_says_why():
    runner, compiled, log, told = _auto_preparing(1.0, 0.2, fails=True)
    program = _program()
    _runs(runner, program, NUMPY_FIRST + 1)
    compiled.go.set()
    assert compiled.done.wait(10)
    time.sleep(0.05)
    _runs(runner, program, 5)
    assert set(log) == {"numpy"}
    assert told == [("numpy", "xla could not compile it: ExecutionError: RESOURCE_EXHAUSTED: out of memory "
                               "while compiling")]


def test_times_that_overlap_keep_the_trial_going_until_max_rounds(monkeypatch):
    monkeypatch.setattr(trial_rules, "TRIAL_SECONDS", 1e9)
    runner, log, told = _auto(0.0, 0.0)
    # both backends take 0.9, 1.1 and 1.0 in every three runs, in different orders: the times never separate
    for name, cycle in (("numpy", [0.9, 1.1, 1.0]), ("xla", [1.1, 0.9, 1.0])):
        runner.runners[name].run = _noisy(runner.runners[name], iter(cycle * 100))
    program = _program()
    _runs(runner, program, NUMPY_FIRST + INLINE_WARM + 2 * MIN_ROUNDS)
    assert told == []  # overlapping: no choice yet
    _runs(runner, program, 2 * (MAX_ROUNDS - MIN_ROUNDS) + 2 * MAX_ROUNDS // BLOCK_RUNS)  # (with the settling runs)
    assert len(told) == 1 and "overlapping" in told[0][1] and f"over {MAX_ROUNDS} runs" in told[0][1]


def _noisy(stand_in, costs):
    def run(*args):
        stand_in.log.append(stand_in.name)
        stand_in.clock.now += next(costs)
        return [stand_in.name]

    return run


def test_another_batch_size_is_a_trial_of_its_own():
    runner, compiled, log, told = _auto_preparing(1.0, 0.2)
    compiled.go.set()
    program = _program()
    _runs(runner, program, NUMPY_FIRST + 1)
    _runs(runner, program, NUMPY_FIRST + 1, feed={"x": np.zeros((5, 4))})
    assert compiled.started.acquire(timeout=10) and compiled.started.acquire(timeout=10)
    assert sorted(compiled.prepared) == [(2, 4), (5, 4)]


def test_a_compile_the_backend_declines_is_not_started_and_the_choice_says_why():
    runner, log, told = _auto(1.0, 0.2)
    runner.runners["xla"].declines = lambda program: "a chain of 9 elementwise ops: too long"
    _runs(runner, _program(), 8)
    assert set(log) == {"numpy"} and told == [("numpy", "a chain of 9 elementwise ops: too long")]


def test_executor_runs_on_auto_by_default_unless_asked_for_what_only_numpy_does(monkeypatch):
    need_jax()
    from gradgen.framework.backend import BACKEND_ENV, default_backend
    from gradgen.framework.backend.numpy.plan_data import PlanOptions

    monkeypatch.delenv(BACKEND_ENV)
    assert Executor().backend == "auto"
    for asked in ({"check_nan_inf": True}, {"check_types": True}, {"options": PlanOptions()}):
        assert Executor(**asked).backend == "numpy", asked
    assert default_backend(CUDAPlace(0)) == "xla"  # (Executor would refuse it here: jax sees no GPU)
    monkeypatch.setenv(BACKEND_ENV, "xla")
    assert Executor().backend == "xla"
    monkeypatch.setenv(BACKEND_ENV, "tpu")
    with pytest.raises(ExecutionError, match="GRADGEN_BACKEND='tpu'"):
        Executor()


def test_numpy_settings_keep_an_auto_executor_on_numpy_and_say_why():
    need_jax()
    main_program, startup = Program(), Program()
    with program_guard(main_program, startup):
        loss = layers.reduce_mean(layers.fc(layers.data("x", [-1, 4], "float64"), 2))
    exe, scope = Executor(backend="auto", check_nan_inf=True), Scope()
    exe.run(startup, scope=scope)
    for _ in range(3):
        exe.run(main_program, feed={"x": np.ones((2, 4))}, fetch_list=[loss], scope=scope)
    assert exe.backend_choice(main_program) == ("numpy", "check_nan_inf: the numpy backend's settings")


DEFAULT_RUNS = """
import subprocess, sys, time
import numpy as np
from gradgen.framework import Executor, Scope
from gradgen.program import Program, layers, program_guard
main, startup = Program(), Program()
with program_guard(main, startup):
    loss = layers.reduce_mean(layers.fc(layers.data("x", [-1, 4], "float32"), 3))
exe, scope = Executor(), Scope()
exe.run(startup, scope=scope)
start = time.perf_counter()
for _ in range(2):
    exe.run(main, feed={"x": np.ones((2, 4), np.float32)}, fetch_list=[loss], scope=scope)
print(exe.backend, "jax" in sys.modules or "torch" in sys.modules, round(time.perf_counter() - start, 3))
for _ in range(3):  # the third run starts the compile in the background; the process then ends mid-compile
    exe.run(main, feed={"x": np.ones((2, 4), np.float32)}, fetch_list=[loss], scope=scope)
"""


def test_the_default_imports_no_compiled_backend_for_two_runs_and_a_process_may_end_mid_compile():
    need_jax()
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "GRADGEN_BACKEND"}
    done = subprocess.run([sys.executable, "-c", DEFAULT_RUNS], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    backend, imported, _seconds = done.stdout.split()
    assert (backend, imported) == ("auto", "False")


def test_a_block_of_short_runs_lasts_block_seconds(monkeypatch):
    """Runs of 1 ms (numpy) and 2 ms (xla) make blocks of ``BLOCK_SECONDS`` (50 and 25 runs at 0.05 s), not of
    three runs, numpy's first one included (its last runs before the compile, as many as make a block); the choice
    comes after one such block each, and says how many runs it weighed."""
    monkeypatch.setattr(trial_rules, "BLOCK_SECONDS", 0.05)
    monkeypatch.setattr(trial_rules, "NUMPY_FIRST", 80)
    runner, log, told = _auto(0.001, 0.002)
    program = _program()
    _runs(runner, program, 80 + INLINE_WARM)
    trial = runner.trial(program, {"x": np.zeros((2, 4))}, ["loss"])
    assert len(trial.seconds["numpy"]) == 50 and trial.blocks["numpy"] == 1
    settle = round(SETTLE_SECONDS / 0.002)
    _runs(runner, program, settle + 24)
    assert told == []  # one run short of xla's block
    _runs(runner, program, 1)
    assert log[80 + INLINE_WARM:] == ["xla"] * (settle + 25)
    assert told[0][0] == "numpy" and "over 25+ runs each (apart)" in told[0][1]
    assert len(trial.seconds["xla"]) == 25


def test_a_job_shorter_than_the_run_time_threshold_is_never_compiled(monkeypatch):
    monkeypatch.setattr(trial_rules, "NUMPY_SECONDS_FIRST", 0.5)
    runner, log, told = _auto(0.01, 0.001)  # 10 ms numpy runs: the trial starts after 50 of them
    program = _program()
    _runs(runner, program, 49)
    assert log == ["numpy"] * 49
    _runs(runner, program, 1 + INLINE_WARM + len(blocks([("xla", 0.001), ("numpy", 0.01)], after="xla")) + 1)
    assert log[50:50 + INLINE_WARM] == ["xla"] * INLINE_WARM and told[0][0] == "xla"


def test_a_run_is_timed_less_its_engines_one_time_measuring(monkeypatch):
    """A run in which the engine measured something once (the torch engine's product calibration, ~0.2 s at the
    first run of each thread count) is timed without it: here each xla run spends 2.0 of its 2.5 s in
    ``one_time``, and the trial, seeing 0.5 against numpy's 1.0, keeps xla (it would keep numpy on 2.5)."""
    from gradgen.framework.backend.shared import one_time

    runner, log, told = _auto(1.0, 0.5)
    xla = runner.runners["xla"]
    clock = xla.clock  # the stand-ins' fake clock, the trial's too
    monkeypatch.setattr(one_time, "_now", clock)
    plain_run = xla.run

    def run_with_measuring(*args):
        with one_time.one_time():
            clock.now += 2.0
        return plain_run(*args)

    monkeypatch.setattr(xla, "run", run_with_measuring)
    program = _program()
    _runs(runner, program, 60)
    assert told == [("xla", "median run over 3 runs each (apart): numpy 1e+03 ms, xla 500 ms")], told
