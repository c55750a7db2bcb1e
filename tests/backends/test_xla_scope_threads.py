"""Reading the scope from other threads while a backend trains on it: every read is a whole step's array.

The xla backend lends the memory of the values a run replaces to their new values (buffer donation); before
reads waited for such a run, 2% of the reads from another thread failed with jax's "Array has been deleted".
"""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, optimizer
from gradgen.program import Program, layers, program_guard
from tests.backends.xla_harness import need_jax

SECONDS = 1.0


def _counting_model(size: int):
    """Every step subtracts exactly 1.0 from every element of ``p`` (SGD, gradient 1, rate 1)."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        p = layers.create_parameter([size], "float64", name="p")
        loss = layers.reduce_sum(p)
        optimizer.SGD(learning_rate=1.0).minimize(loss)
    return main, startup, loss


@pytest.mark.parametrize("backend", ["numpy", "xla"])
def test_reads_from_other_threads_during_runs_always_see_one_whole_step(backend):
    if backend == "xla":
        need_jax()
    main, startup, loss = _counting_model(4096)
    exe, scope = Executor(backend=backend), Scope()
    exe.run(startup, scope=scope)
    scope.set("p", np.zeros(4096))
    exe.run(main, fetch_list=[loss], scope=scope)  # compiled before the clock starts
    stop = threading.Event()
    failures: list[str] = []
    reads = [0, 0]

    def read(k: int) -> None:
        while not stop.is_set():
            try:
                value = scope["p"]
                steps = np.unique(value)
                if len(steps) != 1 or not float(steps[0]).is_integer():
                    failures.append(f"a torn or changing read: {steps[:4]}")
            except Exception as e:  # what this test is about: a read must never fail
                failures.append(f"{type(e).__name__}: {e}")
            reads[k] += 1

    readers = [threading.Thread(target=read, args=(k,)) for k in range(2)]
    for t in readers:
        t.start()
    runs = 0
    deadline = time.perf_counter() + SECONDS
    try:
        while time.perf_counter() < deadline:
            exe.run(main, fetch_list=[loss], scope=scope)
            runs += 1
    finally:
        stop.set()
        for t in readers:
            t.join(timeout=10)
    assert not any(t.is_alive() for t in readers)
    assert not failures, f"{len(failures)} of {sum(reads)} reads failed during {runs} runs, e.g. {failures[:3]}"
    assert runs > 20 and sum(reads) > 100
    np.testing.assert_array_equal(scope["p"], np.full(4096, -float(runs + 1)))
