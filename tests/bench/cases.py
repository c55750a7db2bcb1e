"""Benchmark cases: each returns gradgen's and a hand-written numpy baseline's timings, measured side by side."""
from __future__ import annotations

import ctypes
import gc
import statistics
import time
import tracemalloc
from typing import Callable

import numpy as np

from gradgen.framework import Executor, Scope, append_backward, optimizer
from gradgen.framework.runtime.blas import PROVIDER, gemm
from gradgen.framework.runtime.plan_data import PlanOptions
from gradgen.framework.tools.memory import analyze_memory
from gradgen.program import Program, layers, program_guard
from gradgen.program.initializer import Normal


def keep_heap_warm() -> bool:
    """Stop glibc from trimming the heap after frees, so that neither side refaults fresh pages every step.

    Left alone, the hand-written numpy step's megabyte-sized temporaries are
    returned to the OS and faulted in again each call: the same numpy step
    then takes 1.15 ms instead of 0.53 ms (seed MLP, float64, one BLAS
    thread). The baseline should be numpy at its best. Returns False where
    there is no glibc.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    return bool(libc.mallopt(m_trim_threshold, 2 ** 30)) and bool(libc.mallopt(m_mmap_threshold, 32 * 2 ** 20))


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


def _mlp_step(n, d_in, h, d_out, dtype, lr):
    """gradgen's and numpy's SGD step on relu(x @ w1) @ w2 with squared error, from the same weights."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, d_in], dtype)
        y = layers.data("y", [-1, d_out], dtype)
        w1 = layers.create_parameter([d_in, h], dtype, name="w1", initializer=Normal(0.0, 0.01, seed=1))
        w2 = layers.create_parameter([h, d_out], dtype, name="w2", initializer=Normal(0.0, 0.01, seed=2))
        loss = layers.reduce_sum(layers.square(layers.relu(x @ w1) @ w2 - y))
        optimizer.SGD(lr).minimize(loss)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((n, d_in)).astype(dtype), "y": rng.standard_normal((n, d_out)).astype(dtype)}
    W1, W2 = scope["w1"].copy(), scope["w2"].copy()
    xs, ys = feed["x"], feed["y"]

    def gradgen_step():
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)

    def numpy_step():
        hidden = xs @ W1
        h_relu = np.maximum(hidden, 0)
        y_pred = h_relu @ W2
        np.square(y_pred - ys).sum()
        grad_y_pred = 2.0 * (y_pred - ys)
        grad_w2 = h_relu.T @ grad_y_pred
        grad_h = grad_y_pred @ W2.T
        grad_h[hidden < 0] = 0
        grad_w1 = xs.T @ grad_h
        W1[...] -= lr * grad_w1
        W2[...] -= lr * grad_w2

    outs = [np.empty((n, h), dtype), np.empty((n, d_out), dtype), np.empty((h, d_out), dtype), np.empty((n, h), dtype),
            np.empty((d_in, h), dtype)]
    grad_out = np.ones((n, d_out), dtype)

    def gemms_alone():
        """The step's five matrix products into preallocated arrays through numpy: numpy's floor."""
        np.matmul(xs, W1, out=outs[0])
        np.matmul(outs[0], W2, out=outs[1])
        np.matmul(outs[0].T, grad_out, out=outs[2])
        np.matmul(grad_out, W2.T, out=outs[3])
        np.matmul(xs.T, outs[3], out=outs[4])

    def provider_gemms():
        """The same five products through gradgen's chosen BLAS (``runtime.blas``): gradgen's floor."""
        gemm(False, False, 1.0, xs, W1, 0.0, outs[0])
        gemm(False, False, 1.0, outs[0], W2, 0.0, outs[1])
        gemm(True, False, 1.0, outs[0], grad_out, 0.0, outs[2])
        gemm(False, True, 1.0, grad_out, W2, 0.0, outs[3])
        gemm(True, False, 1.0, xs, outs[3], 0.0, outs[4])

    return gradgen_step, numpy_step, gemms_alone, provider_gemms if gemm is not None else gemms_alone


def _step_rows(label: str, dtype: str, fns, repeats: int) -> list[dict]:
    g_s, numpy_s, floor_s, provider_s = paired_medians(list(fns), repeats)
    name = PROVIDER.name if PROVIDER is not None else "numpy matmul"
    return [{"case": f"{label} ({dtype})", "gradgen_s": g_s, "numpy_s": numpy_s},
            {"case": f"  its 5 GEMMs alone through numpy ({dtype})", "gradgen_s": floor_s, "numpy_s": numpy_s},
            {"case": f"  its 5 GEMMs alone through {name}, gradgen's floor", "gradgen_s": provider_s,
             "numpy_s": numpy_s}]


def mlp_step(dtype: str, repeats: int) -> list[dict]:
    """The seed MLP step, and its matrix products alone (numpy's and gradgen's BLAS floors), against numpy's
    whole step as a user writes it (a function per step)."""
    return _step_rows("seed MLP step", dtype, _mlp_step(64, 1000, 100, 10, dtype, 1e-6), repeats)


def large_mlp_step(repeats: int) -> list[dict]:
    return _step_rows("large MLP step", "float32", _mlp_step(512, 4096, 4096, 1000, "float32", 1e-6), repeats)


def tanh_chain(repeats: int, length: int = 1000) -> list[dict]:
    """A chain of ``length`` tanh ops on 4 numbers, fused (one generated loop) and unfused, against numpy's calls."""
    main = Program()
    with program_guard(main, Program()):
        h = layers.data("x", [4], "float64")
        for _ in range(length):
            h = layers.tanh(h)
    feed = {"x": np.linspace(-1.0, 1.0, 4)}
    fused, plain = Executor(), Executor(options=PlanOptions(fuse_elementwise=False, regions=False))
    x = feed["x"]

    def numpy_chain():
        v = x
        for _ in range(length):
            v = np.tanh(v)
        return v

    f, p, n = paired_medians([lambda: fused.run(main, feed=feed, fetch_list=[h]),
                              lambda: plain.run(main, feed=feed, fetch_list=[h]), numpy_chain], repeats)
    per = 1e6 / length
    return [{"case": f"chain of {length} tanh, fused, per op", "gradgen_s": f * per, "numpy_s": n * per,
             "unit": "us per op; target 0.1"},
            {"case": f"chain of {length} tanh, unfused, per op", "gradgen_s": p * per, "numpy_s": n * per,
             "unit": "us per op"},
            {"case": "  unfused overhead above the numpy calls", "gradgen_s": (p - n) * per, "numpy_s": None,
             "unit": "us per op; target 0.5"}]


def tiny_op_chain(repeats: int, length: int = 1000) -> dict:
    """Per-op overhead: a chain of ``length`` scale ops on a 4-element vector, against the same numpy calls."""
    main = Program()
    with program_guard(main, Program()):
        h = layers.data("x", [4], "float64")
        for _ in range(length):
            h = layers.scale(h, 1.0001, 0.5)
    exe, scope = Executor(), Scope()
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
