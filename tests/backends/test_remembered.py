"""``backend="auto"``'s choices kept between processes (``runtime/remembered.py``): a later trial of the same
program takes the recorded engine as soon as it is prepared (before its first run when it prepared quickly),
prepares nothing else before it, still checks it against the runner-up, and records what the check finds."""
from __future__ import annotations

import json
import os
import threading
import time

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, optimizer
from gradgen.framework.errors import ExecutionError
from gradgen.framework.runtime import remembered
from gradgen.framework.runtime import trial_rules
from gradgen.framework.runtime.auto_run import AutoRunner
from gradgen.framework.runtime.trial_rules import NUMPY_FIRST, RECHECK_SECONDS_REMEMBERED, SETTLE_SECONDS
from gradgen.program import Program, layers, program_guard
from tests.backends.xla_harness import need_jax


@pytest.fixture(autouse=True)
def _own_cache(monkeypatch, tmp_path):
    """Records go to a folder of this test's; choices are remembered (the suite turns that off elsewhere)."""
    monkeypatch.setenv("GRADGEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(remembered.REMEMBER_ENV, "1")
    monkeypatch.setattr(trial_rules, "CUT_RATIO", float("inf"))
    monkeypatch.setattr(trial_rules, "BLOCK_SECONDS", 0.0)


class _Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


class _Engine:
    """A stand-in engine: each run advances the fake clock by ``cost`` and is logged."""

    def __init__(self, name: str, clock: _Clock, cost: float, log: list, prepared: list, fails: bool = False):
        self.name, self.clock, self.cost, self.log, self.prepared, self.fails = name, clock, cost, log, prepared, fails

    def problems(self, block) -> list[str]:
        return []

    def run(self, program, feed, fetch_names, scope, return_numpy, mark, built, agreed) -> list:
        self.log.append(self.name)
        self.clock.now += self.cost
        return [self.name]


class _Compiled(_Engine):
    """A stand-in compiled engine: its ``prepare`` (run in the trial's background thread) is logged, computes until
    ``release`` when given one (a compile: its CPU time is what a record keeps), and raises when ``fails``."""

    release: threading.Event | None = None
    computing = 0.0
    """CPU seconds its ``prepare`` computes at least, when it waits for ``release``."""
    compiling = 0.0
    """Seconds (real ones: a preparation is timed by the wall clock) its ``prepare`` spends compiling what a
    persistent cache keeps, and returns."""
    waiting = 0.0
    """Seconds its ``prepare`` waits (for the interpreter lock, a disk), not computing."""

    def prepare(self, program, feed, fetch_names, scope) -> float:
        self.prepared.append(self.name)
        if self.release is not None:
            deadline, enough = time.perf_counter() + 30, time.thread_time() + self.computing
            while (not self.release.is_set() or time.thread_time() < enough) and time.perf_counter() < deadline:
                pass
        if self.fails:
            raise ExecutionError("out of memory while compiling")
        time.sleep(self.compiling + self.waiting)
        return self.compiling


class _Process:
    """One process's auto runner over stand-ins costing ``costs`` (numpy first), remembering its choices."""

    def __init__(self, costs: dict[str, float], fails: tuple[str, ...] = ()):
        self.clock, self.log, self.prepared, self.told = _Clock(), [], [], []
        self.compiled = compiled = [_Compiled(name, self.clock, cost, self.log, self.prepared, name in fails)
                                    for name, cost in costs.items() if name != "numpy"]
        self.runner = AutoRunner(_Engine("numpy", self.clock, costs["numpy"], self.log, self.prepared), compiled,
                                 lambda program, backend, reason: self.told.append((backend, reason)), self.clock,
                                 remember=True)

    def runs(self, program, n: int, rows: int = 2) -> None:
        for _ in range(n):
            self.runner.run(program, {"x": np.zeros((rows, 4))}, ["loss"], None, True, None, None, None)
            _wait_for_preparations()

    def runs_until_told(self, program, most: int = 500) -> None:
        for _ in range(most):
            if self.told:
                return
            self.runs(program, 1)
        raise AssertionError(f"no choice after {most} runs: {self.log[-20:]}")


def _wait_for_preparations() -> None:
    for thread in threading.enumerate():
        if thread.name.startswith("gradgen-auto-compile-"):
            thread.join(10)


def _program(width: int = 2) -> Program:
    main_program, startup = Program(), Program()
    with program_guard(main_program, startup):
        x = layers.data("x", [-1, 4], "float64")
        layers.reduce_mean(layers.fc(x, width, name="fc"), name="loss")
    return main_program


def _records(tmp_path) -> list[dict]:
    folder = tmp_path / "choices"
    return [json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))] if folder.exists() else []


def _forget_preparation_times(tmp_path) -> None:
    """Make the records as a gradgen that kept no preparation times wrote them."""
    for path in (tmp_path / "choices").glob("*.json"):
        record = json.loads(path.read_text())
        del record["prepare_seconds"]
        path.write_text(json.dumps(record))


def test_a_second_process_runs_the_remembered_engine_as_soon_as_it_is_prepared(monkeypatch, tmp_path):
    first = _Process({"numpy": 1.0, "xla": 0.5, "fast": 0.25})
    first.runs_until_told(_program())
    assert first.told[0][0] == "fast"
    [record] = _records(tmp_path)
    assert record["chosen"] == "fast" and record["runner_up"] == "xla" and record["medians"]["fast"] == 0.25
    _forget_preparation_times(tmp_path)  # (how long it takes to prepare unknown: numpy runs beside it)

    monkeypatch.setattr(trial_rules, "NUMPY_SECONDS_FIRST", 1e9)  # a trial would wait for it; a recall does not
    second = _Process({"numpy": 1.0, "xla": 0.5, "fast": 0.25})
    program = _program()  # (built again: the same program, another object)
    second.runs(program, NUMPY_FIRST + 1)  # the run after the first ones starts the preparation
    assert second.prepared == ["fast"] and second.told == []  # only the remembered engine prepares
    second.runs(program, 1)
    assert second.told[0][0] == "fast" and second.told[0][1].startswith("remembered from a run at ")
    assert "median run over" in second.told[0][1]  # the earlier trial's reason, as it was
    assert second.log == ["numpy"] * (NUMPY_FIRST + 1) + ["fast"]  # no timed blocks of the others
    halfway = round(RECHECK_SECONDS_REMEMBERED / 2 / 0.25)  # the runner-up prepares halfway to the first check
    second.runs(program, halfway - 2)
    assert second.prepared == ["fast"]
    second.runs(program, 2)
    assert second.prepared == ["fast", "xla"] and set(second.log[-halfway:]) == {"fast"}


def test_a_remembered_engine_that_prepared_quickly_prepares_before_the_first_run(tmp_path):
    first = _Process({"numpy": 1.0, "xla": 0.5, "fast": 0.25})
    first.runs_until_told(_program())
    [record] = _records(tmp_path)
    assert 0.0 <= record["prepare_seconds"] < 1.0  # (the stand-in's preparation: a list append)

    second = _Process({"numpy": 1.0, "xla": 0.5, "fast": 0.25})
    program = _program()
    second.runs(program, 1)
    assert second.log == ["fast"] and second.prepared == ["fast"]  # the first run waited for it
    assert second.told[0][0] == "fast" and "prepared before the first run, in " in second.told[0][1]
    [again] = _records(tmp_path)  # its own preparation's time, the earlier measurement's stamp and medians
    assert again["prepare_seconds"] != record["prepare_seconds"] and again["when"] == record["when"]
    assert {key: again[key] for key in ("chosen", "runner_up", "medians", "reason")} == \
        {key: record[key] for key in ("chosen", "runner_up", "medians", "reason")}


def test_a_record_keeps_the_preparation_a_later_process_makes_less_the_compiles_a_cache_keeps(monkeypatch,
                                                                                                  tmp_path):
    """A preparation of 0.4 s, all of it compiling what a persistent cache keeps, is recorded as the rest (under
    0.3 s), so the next process waits for it before its first run where the rule allows 0.3 s: the cache makes
    its preparation short. (Recorded whole, 0.4 s, it would prepare beside numpy's runs.)"""
    monkeypatch.setattr(trial_rules, "RECALLED_WAIT_SECONDS", 0.3)
    first = _Process({"numpy": 1.0, "fast": 0.25})
    first.compiled[0].compiling = 0.4
    first.runs_until_told(_program())
    [record] = _records(tmp_path)
    assert 0.0 <= record["prepare_seconds"] < 0.3
    second = _Process({"numpy": 1.0, "fast": 0.25})
    second.runs(_program(), 1)
    assert second.log == ["fast"] and "prepared before the first run, in " in second.told[0][1]


def test_a_record_keeps_the_work_of_a_preparation_not_its_waits_beside_the_trial(tmp_path):
    """A trial's preparation runs beside numpy's runs and the other engines' preparations, and its wall time
    overstates what the next process, which prepares it alone, takes (``PreparationClock``)."""
    first = _Process({"numpy": 1.0, "fast": 0.25})
    first.compiled[0].waiting = 0.4
    program = _program()
    first.runs_until_told(program)
    [record] = _records(tmp_path)
    trial = first.runner.trial(program, {"x": np.zeros((2, 4))}, ["loss"])
    assert 0.0 <= record["prepare_seconds"] < 0.2 and trial.prepare_seconds["fast"] >= 0.4  # (the profile's: all)


def test_a_first_run_waits_for_a_remembered_preparation_only_so_long(monkeypatch, tmp_path):
    _Process({"numpy": 1.0, "fast": 0.25}).runs_until_told(_program())
    monkeypatch.setattr(trial_rules, "recalled_wait", lambda recorded: 0.2)
    later = _Process({"numpy": 1.0, "fast": 0.25})
    later.compiled[0].release = release = threading.Event()  # (a cache emptied since: it compiles afresh)
    later.compiled[0].computing = 0.3
    program = _program()
    try:
        later.runner.run(program, {"x": np.zeros((2, 4))}, ["loss"], None, True, None, None, None)
        later.runner.run(program, {"x": np.zeros((2, 4))}, ["loss"], None, True, None, None, None)
        assert later.log == ["numpy", "numpy"] and later.prepared == ["fast"] and later.told == []
    finally:
        release.set()
    _wait_for_preparations()
    later.runs(program, 1)
    assert later.log[-1] == "fast" and later.told[0][0] == "fast"
    assert "prepared before the first run" not in later.told[0][1]
    [record] = _records(tmp_path)
    assert record["prepare_seconds"] >= 0.29  # what it took this time: the next process does not wait as long


def test_a_long_preparation_is_not_waited_for(tmp_path):
    _Process({"numpy": 1.0, "fast": 0.25}).runs_until_told(_program())
    [path] = (tmp_path / "choices").glob("*.json")
    record = json.loads(path.read_text())
    record["prepare_seconds"] = 2 * trial_rules.RECALLED_WAIT_SECONDS
    path.write_text(json.dumps(record))
    later = _Process({"numpy": 1.0, "fast": 0.25})
    later.runs(_program(), NUMPY_FIRST + 1)
    assert later.log == ["numpy"] * (NUMPY_FIRST + 1) and later.prepared == ["fast"]


def test_the_check_of_a_remembered_choice_weighs_the_runner_up_and_records_what_it_finds(tmp_path):
    _Process({"numpy": 1.0, "xla": 0.25}).runs_until_told(_program())
    assert _records(tmp_path)[0]["chosen"] == "xla"
    later = _Process({"numpy": 0.125, "xla": 0.25})  # numpy is faster on this day
    program = _program()
    later.runs_until_told(program)
    assert later.told[0][0] == "xla"
    later.runs(program, round(RECHECK_SECONDS_REMEMBERED / 0.25) + 40)  # its check comes after that run time
    assert [backend for backend, _ in later.told] == ["xla", "numpy"]
    assert later.told[1][1].startswith("checked again after ")
    [record] = _records(tmp_path)
    assert record["chosen"] == "numpy" and record["runner_up"] == "xla"
    assert record["reason"].startswith("checked again") and record["medians"]["numpy"] == 0.125

    third = _Process({"numpy": 0.125, "xla": 0.25})
    third.runs(_program(), 1)
    assert third.told[0][0] == "numpy" and third.prepared == []  # remembered numpy: chosen before any preparation


def test_a_remembered_numpy_prepares_nothing_until_halfway_to_its_first_check(tmp_path):
    _Process({"numpy": 0.25, "xla": 1.0}).runs_until_told(_program())
    later = _Process({"numpy": 0.25, "xla": 1.0})
    program = _program()
    halfway = round(RECHECK_SECONDS_REMEMBERED / 2 / 0.25)
    later.runs(program, halfway)
    assert later.prepared == [] and later.told[0][0] == "numpy" and set(later.log) == {"numpy"}
    later.runs(program, 1)
    assert later.prepared == ["xla"]


def test_a_remembered_engine_that_fails_to_prepare_leaves_the_others_to_a_trial(tmp_path):
    _Process({"numpy": 1.0, "xla": 0.5, "fast": 0.25}).runs_until_told(_program())
    later = _Process({"numpy": 1.0, "xla": 0.5, "fast": 0.25}, fails=("fast",))
    later.runs_until_told(_program())
    assert later.prepared == ["fast", "xla"]
    assert later.told[0][0] == "xla" and "median run over" in later.told[0][1] and "fast could not" in later.told[0][1]
    assert _records(tmp_path)[0]["chosen"] == "xla"


def test_a_record_is_for_one_program_feed_shape_and_set_of_engines(tmp_path):
    _Process({"numpy": 1.0, "xla": 0.25}).runs_until_told(_program())
    for other, feed_rows, engines in ((_program(width=3), 2, {"numpy": 1.0, "xla": 0.25}),
                                      (_program(), 5, {"numpy": 1.0, "xla": 0.25}),
                                      (_program(), 2, {"numpy": 1.0, "xla": 0.25, "fast": 0.5})):
        process = _Process(engines)
        process.runs(other, NUMPY_FIRST + 1, rows=feed_rows)
        assert process.told == [] and set(process.prepared) == set(engines) - {"numpy"}  # a trial of its own


def test_the_key_leaves_out_source_lines_but_not_threads(tmp_path):
    def built_here() -> Program:
        return _program()

    shapes = {"x": (2, 4)}
    one = remembered.trial_key(_program(), shapes, ["loss"], ["numpy", "xla"], None)
    assert remembered.trial_key(built_here(), shapes, ["loss"], ["numpy", "xla"], None) == one
    assert remembered.trial_key(_program(), shapes, ["loss"], ["numpy", "xla"], 1) != one
    assert remembered.trial_key(_program(), {"x": (3, 4)}, ["loss"], ["numpy", "xla"], None) != one


@pytest.mark.parametrize("text", ["", "{", "[]", '{"chosen": "xla"}', "1e999999",
                                  '{"chosen": "tpu", "runner_up": null, "medians": {"tpu": 1}, "apart": true, '
                                  '"reason": "", "when": 0}',
                                  '{"chosen": "xla", "runner_up": "numpy", "medians": {"xla": 1}, "apart": true, '
                                  '"reason": "", "when": 0}',
                                  *('{"chosen": "xla", "runner_up": null, "medians": {"xla": 1}, "apart": true, '
                                    f'"reason": "", "when": 0, "prepare_seconds": {took}}}'
                                    for took in ("-1", "NaN", "Infinity", '"1"', "[1]", "true"))])
def test_an_unreadable_or_stale_record_is_ignored(tmp_path, text):
    os.makedirs(tmp_path / "choices")
    (tmp_path / "choices" / "k.json").write_text(text)
    assert remembered.recall("k", ["numpy", "xla"]) is None


def test_an_unwritable_cache_folder_leaves_the_choice_unrecorded(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("GRADGEN_CACHE_DIR", str(blocker))  # a file where the folder should be
    process = _Process({"numpy": 1.0, "xla": 0.25})
    process.runs_until_told(_program())
    assert process.told[0][0] == "xla"


def test_turned_off_nothing_is_recalled_or_recorded(monkeypatch, tmp_path):
    monkeypatch.setenv(remembered.REMEMBER_ENV, "0")
    need_jax()
    main_program, startup = Program(), Program()
    with program_guard(main_program, startup):
        loss = layers.reduce_mean(layers.fc(layers.data("x", [-1, 4], "float64"), 2))
        optimizer.SGD(0.1).minimize(loss)
    exe, scope = Executor(backend="auto"), Scope()
    exe.run(startup, scope=scope)
    exe.run(main_program, feed={"x": np.ones((2, 4))}, fetch_list=[loss], scope=scope)
    assert not (tmp_path / "choices").exists() and exe._runner._remember is False


def test_two_executors_the_second_starts_from_the_firsts_choice(monkeypatch, tmp_path):
    """End to end on the real engines: the first executor's trial records its choice; a second executor (as a
    later process would) takes it in its first run, which waits for the remembered engine's preparation."""
    need_jax()
    monkeypatch.setattr(trial_rules, "NUMPY_SECONDS_FIRST", 0.0)
    monkeypatch.setattr(trial_rules, "SETTLE_SECONDS", SETTLE_SECONDS / 10)
    main_program, startup = Program(), Program()
    with program_guard(main_program, startup):
        loss = layers.reduce_mean(layers.fc(layers.tanh(layers.fc(layers.data("x", [-1, 8], "float64"), 16)), 2))
        optimizer.SGD(0.01).minimize(loss)
    feed = {"x": np.random.default_rng(0).standard_normal((4, 8))}
    choices = []
    for _ in range(2):
        if choices:  # (the first one's preparation, beside its runs, took seconds: wait for it whatever it took)
            monkeypatch.setattr(trial_rules, "RECALLED_WAIT_SECONDS", float("inf"))
        exe, scope = Executor(backend="auto"), Scope()
        exe.run(startup, scope=scope)
        runs, deadline = 0, time.monotonic() + 120  # (jax's import beside a tiny step's runs takes seconds)
        while exe.backend_choice(main_program) is None and time.monotonic() < deadline:
            exe.run(main_program, feed=feed, fetch_list=[loss], scope=scope)
            runs += 1
        choices.append((exe.backend_choice(main_program), runs))
    (first, _), (second, second_runs) = choices
    assert first is not None and second is not None and not first[1].startswith("remembered")
    assert second[0] == first[0] and second[1].startswith("remembered from a run at ") and second_runs == 1
    assert len(_records(tmp_path)) == 1


def test_the_key_changes_with_gradgens_code(tmp_path, monkeypatch):
    """``_code_stamp``: a file of gradgen's edited (its size or time), added or removed gives another digest, so a
    record made under the old code is not recalled; its tests and caches are left out."""
    package = tmp_path / "pkg"
    (package / "framework").mkdir(parents=True)
    (package / "tests").mkdir()
    (package / "framework" / "a.py").write_text("x = 1\n")
    stamp = remembered._code_stamp.__wrapped__
    first = stamp(str(package))
    (package / "tests" / "test_a.py").write_text("y = 2\n")
    (package / "framework" / "notes.txt").write_text("z")
    assert stamp(str(package)) == first
    (package / "framework" / "a.py").write_text("x = 2\n")
    os.utime(package / "framework" / "a.py", ns=(1, 1))
    second = stamp(str(package))
    assert second != first
    os.utime(package / "framework" / "a.py", ns=(2, 2))
    assert stamp(str(package)) != second
    (package / "framework" / "b.py").write_text("")
    assert stamp(str(package)) not in (first, second)
    shapes = {"x": (2, 4)}
    one = remembered.trial_key(_program(), shapes, ["loss"], ["numpy", "xla"], None)
    remembered._setting.cache_clear()
    monkeypatch.setattr(remembered, "_code_stamp", lambda: "edited")
    try:
        assert remembered.trial_key(_program(), shapes, ["loss"], ["numpy", "xla"], None) != one
    finally:
        remembered._setting.cache_clear()
