"""The scale bench's measurement (``tests/bench/compile_scale``): runs that held a full collection told apart."""
from __future__ import annotations

import gc

from gradgen.framework import Executor
from tests.bench.compile_scale import main, measure


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


def test_a_second_process_shares_the_first_ones_cache_and_gets_its_own_row(capsys):
    main(["--engine", "numpy", "--sizes", "6", "--runs", "3", "--seconds", "0", "--processes", "2"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "ops" not in line]
    ops = [row.split("|")[1].strip() for row in rows]
    assert len(ops) == 2 and ops[1] == f"{ops[0]} (process 2)"
    assert all(row.split("|")[6].strip() == "numpy" for row in rows)
