"""The scale bench's measurement (``tests/bench/compile_scale``): runs that held a full collection told apart."""
from __future__ import annotations

import gc

from gradgen.framework import Executor
from tests.bench.compile_scale import measure


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
