"""The memory analysis agrees with what a real run allocates (tracemalloc)."""
import gc
import tracemalloc

import numpy as np

from framework import Executor, Scope, append_backward
from framework.memory import analyze_memory, memory_text
from program import Program, layers, program_guard


def _measured_peak(program, feed, fetch):
    exe, scope = Executor(), Scope()
    exe.run(program, feed=feed, fetch_list=fetch, scope=scope)  # build the plan outside the measurement
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    exe.run(program, feed=feed, fetch_list=fetch, scope=scope)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak


def test_chain_peak_matches_tracemalloc():
    main = Program()
    with program_guard(main, Program()):
        h = layers.data("x", [-1, 1024], "float64")
        for _ in range(30):
            h = layers.relu(h)
        out = layers.reduce_sum(h)
    feed = {"x": np.random.default_rng(0).standard_normal((128, 1024))}  # 1 MiB per array
    report = analyze_memory(main, {"x": (128, 1024)}, [out])
    assert report.peak_bytes == 2 * 2 ** 20  # one array being read, one being written
    measured = _measured_peak(main, feed, [out])
    assert 0.9 * report.peak_bytes <= measured <= 1.25 * report.peak_bytes, (measured, report.peak_bytes)


def test_training_step_names_what_is_alive_at_the_peak():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 256], "float64")
        h = x
        for i in range(4):
            h = layers.relu(h @ layers.create_parameter([256, 256], "float64", name=f"w{i}"))
        loss = layers.mean(h)
        append_backward(loss)
    report = analyze_memory(main, {"x": (64, 256)}, [loss])
    assert report.resting_bytes == 64 * 256 * 8 + 4 * 256 * 256 * 8
    assert len(report.live_after) == len(main.global_block().ops)
    names = [n for n, _ in report.at_peak]
    assert any(n.endswith("@GRAD") for n in names)  # the peak is in the backward part
    assert report.peak_bytes >= max(report.live_after)
    text = memory_text(report)
    assert "peak:" in text and "resting" in text
