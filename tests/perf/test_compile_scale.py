"""The scale bench's measurement (``tests/bench/compile_scale``): runs that held a full collection told apart."""
from __future__ import annotations

import gc

from gradgen.framework import Executor
from tests.bench.compile_scale import main, measure, split_waits


def test_runs_that_held_a_full_collection_are_counted_apart(monkeypatch):
    quiet = measure("numpy", steps=3, runs=4)
    plain_run = Executor.run

    def run_and_collect(self, *args, **kwargs):
        gc.collect()  # a full collection inside every run
        return plain_run(self, *args, **kwargs)

    monkeypatch.setattr(Executor, "run", run_and_collect)
    collected = measure("numpy", steps=3, runs=4)
    assert collected["ops"] == quiet["ops"] and collected["runs"] >= 4
    assert collected["collected_runs"] == collected["runs"] - 1  # every run after the first
    assert collected["longest_uncollected"] == 0.0  # none left to time
    assert quiet["collected_runs"] < quiet["runs"] and 0 < quiet["longest_uncollected"] <= quiet["longest_wait"]
    assert quiet["longest_beside"] is None  # (an engine fixed from the start: every run after the first is its own)
    assert quiet["longest_after_choice"] == quiet["longest_wait"]


def test_runs_beside_the_preparations_are_weighed_against_numpy_alone_and_later_ones_against_the_steady_step():
    times = [1.0, 0.3, 0.2, 0.2, 2.0, 0.4, 0.1, 0.1, 0.3]  # two runs alone, four beside, the choice, three after
    beside, after = split_waits(times, chosen_after=5, steady=0.1, alone_seconds=1.0, alone_runs=2)
    assert beside == 2.0 / 0.3 and after == 0.3 / 0.1
    assert split_waits(times, None, 0.1, 1.0, 2) == (2.0 / 0.3, None)  # no choice came: no run after it
    assert split_waits(times, 0, 0.1, 1.0, 2) == (None, 2.0 / 0.1)  # chosen at the first run
    beside, _ = split_waits([0.1] * 4 + [0.5] + [0.1] * 10, 12, 0.1, alone_seconds=0.35, alone_runs=2)
    assert beside == 0.5 / 0.1  # numpy's first runs last until the first second is spent, past the first two


def test_a_second_process_shares_the_first_ones_cache_and_gets_its_own_row(capsys):
    main(["--engine", "numpy", "--sizes", "6", "--runs", "3", "--seconds", "0", "--processes", "2"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "ops" not in line]
    ops = [row.split("|")[1].strip() for row in rows]
    assert len(ops) == 2 and ops[1] == f"{ops[0]} (process 2)"
    assert all(row.split("|")[6].strip() == "numpy" for row in rows)
