"""Benchmark cases measured in the bench's own process: gradgen against a hand-written numpy baseline, side by side.

The MLP steps are not here: each side of those runs in a process of its own (``mlp_rows``).
"""
from __future__ import annotations

import gc
import statistics
import time
import tracemalloc
from typing import Callable

import numpy as np

from gradgen.framework import Executor, Scope, append_backward, optimizer
from gradgen.framework.tools.memory import analyze_memory
from gradgen.program import Program, layers, program_guard
from gradgen.program.initializer import Normal


def median_time(fn: Callable[[], object], repeats: int, warmup: int = 1) -> float:
    """The median wall time of ``fn`` over ``repeats`` calls, after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def paired_medians(fns: list[Callable[[], object]], repeats: int, warmup: int = 1) -> list[float]:
    """Median wall times of ``fns``, called in turn ``repeats`` times: load from other processes hits all alike."""
    for fn in fns:
        for _ in range(warmup):
            fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, ts in zip(fns, times):
            start = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - start)
    return [statistics.median(ts) for ts in times]


def block_medians(steps: dict[str, Callable[[], object]], rounds: int, block: int, warmup: int = 3,
                  settle: float = 0.0) -> dict[str, float]:
    """Per name, the median ms a call of ``steps[name]`` over ``rounds`` blocks of ``block`` calls, the blocks taken
    in turn (after ``warmup`` calls of each): a slow moment of the machine hits every side alike. ``settle``: seconds
    of pause before each block, for the thread pools of the block before to go idle (XLA's and torch's spin a while
    after their work, on the cores the next block wants)."""
    for step in steps.values():
        for _ in range(warmup):
            step()
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            time.sleep(settle)
            start = time.perf_counter()
            for _ in range(block):
                step()
            times[name].append((time.perf_counter() - start) / block * 1e3)
    return {name: statistics.median(values) for name, values in times.items()}


def tanh_chain(repeats: int, length: int = 1000) -> list[dict]:
    """A chain of ``length`` tanh ops on 4 numbers through the numpy engine, against numpy's own calls."""
    main = Program()
    with program_guard(main, Program()):
        h = layers.data("x", [4], "float64")
        for _ in range(length):
            h = layers.tanh(h)
    feed = {"x": np.linspace(-1.0, 1.0, 4)}
    plain = Executor(backend="numpy")
    x = feed["x"]

    def numpy_chain():
        v = x
        for _ in range(length):
            v = np.tanh(v)
        return v

    p, n = paired_medians([lambda: plain.run(main, feed=feed, fetch_list=[h]), numpy_chain], repeats)
    per = 1e6 / length
    return [{"case": f"chain of {length} tanh, per op", "gradgen_s": p * per, "numpy_s": n * per,
             "unit": "us per op"},
            {"case": "  overhead above the numpy calls", "gradgen_s": (p - n) * per, "numpy_s": None,
             "unit": "us per op; target 0.5"}]


def tiny_op_chain(repeats: int, length: int = 1000) -> dict:
    """Per-op overhead: a chain of ``length`` scale ops on a 4-element vector, op by op (no region: that would
    make the chain one call), against the same numpy calls."""
    main = Program()
    with program_guard(main, Program()):
        h = layers.data("x", [4], "float64")
        for _ in range(length):
            h = layers.scale(h, 1.0001, 0.5)
    exe, scope = Executor(backend="numpy"), Scope()
    feed = {"x": np.ones(4)}
    x = feed["x"]

    def numpy_chain():
        v = x
        for _ in range(length):
            v = v * 1.0001 + 0.5
        return v

    g, n = paired_medians([lambda: exe.run(main, feed=feed, fetch_list=[h], scope=scope), numpy_chain], repeats)
    return {"case": f"chain of {length} tiny ops", "gradgen_s": g, "numpy_s": n,
            "overhead_us_per_op": (g - n) / length * 1e6}


def dispatch_overhead(repeats: int, length: int = 2000) -> dict:
    """The run loop's own cost per op: a chain of ``assign`` ops, whose kernel returns its input (target: 2 us).

    This was a unit test once; a wall-clock figure belongs here, where a loaded machine cannot fail CI.
    """
    main = Program()
    with program_guard(main, Program()):
        h = layers.data("x", shape=[], dtype="float64")
        for _ in range(length):
            h = layers.assign(h)
    exe, scope, feed = Executor(), Scope(), {"x": np.array(1.0)}
    best = min(median_time(lambda: exe.run(main, feed=feed, fetch_list=[h], scope=scope), 1) for _ in range(repeats))
    return {"case": f"run loop per op, chain of {length} assign ops", "gradgen_s": best / length * 1e6,
            "numpy_s": None, "unit": "us per op, best of runs; target 2"}


def _timed_backward_chain(length: int) -> float:
    main = Program()
    with program_guard(main, Program()):
        h = layers.data("x", [4], "float64")
        w = layers.create_parameter([4], "float64", name="w")
        h = h * w
        for _ in range(length - 2):
            h = layers.tanh(h)
        loss = layers.reduce_sum(h)
    gc.collect()
    start = time.perf_counter()
    with program_guard(main, Program()):
        append_backward(loss)
    return time.perf_counter() - start


def backward_chain(length: int, repeats: int = 3) -> dict:
    """Median time of ``append_backward`` on a fresh chain of ``length`` forward ops (a compiler pass: no baseline)."""
    times = [_timed_backward_chain(length) for _ in range(repeats)]
    return {"case": f"append_backward, {length} ops", "gradgen_s": statistics.median(times), "numpy_s": None,
            "unit": f"s, median of {repeats}"}


def peak_memory_step(layers_count: int = 50, width: int = 1024, batch: int = 256) -> dict:
    """Peak traced memory of one training step of a deep MLP over its resting state, gradgen vs numpy."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, width], "float32")
        h = x
        for i in range(layers_count):
            w = layers.create_parameter([width, width], "float32", name=f"w{i}", initializer=Normal(0.0, 0.02, seed=i))
            h = layers.relu(h @ w)
        loss = layers.mean(layers.square(h))
        optimizer.SGD(1e-3).minimize(loss)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    xs = np.random.default_rng(0).standard_normal((batch, width)).astype("float32")
    weights = [scope[f"w{i}"].copy() for i in range(layers_count)]

    def numpy_step():
        acts = [xs]
        for w in weights:
            acts.append(np.maximum(acts[-1] @ w, 0))
        grad = 2.0 * acts[-1] / acts[-1].size
        for i in reversed(range(layers_count)):
            grad = grad * (acts[i + 1] > 0)
            gw = acts[i].T @ grad
            grad = grad @ weights[i].T
            weights[i] -= 1e-3 * gw

    def traced(fn, warm=True):
        if warm:
            fn()  # warm up: plans and caches
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        fn()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return peak - base

    report = analyze_memory(main, {"x": xs.shape}, [loss])
    fresh = Executor()
    fresh.plan_for(main, ["x"], [loss.name])
    first = traced(lambda: fresh.run(main, feed={"x": xs}, fetch_list=[loss], scope=scope), warm=False)
    g = traced(lambda: exe.run(main, feed={"x": xs}, fetch_list=[loss], scope=scope))
    n = traced(numpy_step)
    mib = 2 ** 20
    return [{"case": f"{layers_count}-layer MLP step, peak over resting, later runs", "gradgen_s": g / mib,
             "numpy_s": n / mib, "unit": "MiB"},
            {"case": "  first run's peak vs the schedule's lower bound", "gradgen_s": first / mib,
             "numpy_s": report.peak_bytes / mib, "unit": "MiB"},
            {"case": "  plan buffers held between runs (analysis)", "gradgen_s": report.held_bytes / mib,
             "numpy_s": None, "unit": "MiB"}]
