"""The memory analysis agrees with what a real run allocates (tracemalloc)."""
import gc
import tracemalloc

import numpy as np

from gradgen.framework import Executor, Scope, append_backward, optimizer
from gradgen.framework.backend.numpy.plan_data import PlanOptions
from gradgen.framework.tools.memory import analyze_memory, memory_text
from gradgen.program import Program, layers, program_guard


def _traced(run):
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    run()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak


def _measured_peaks(program, feed, fetch, options=None):
    """What a first run and a second run of ``program`` allocate at most (the plan is built before either)."""
    exe, scope = Executor(options=options), Scope()
    exe.plan_for(program, list(feed), [f.name for f in fetch])
    first = _traced(lambda: exe.run(program, feed=feed, fetch_list=fetch, scope=scope))
    return first, _traced(lambda: exe.run(program, feed=feed, fetch_list=fetch, scope=scope))


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
    first, steady = _measured_peaks(main, feed, [out], PlanOptions())
    for run in (first, steady):  # no buffers kept between runs: every run allocates what the analysis says
        assert 0.9 * report.peak_bytes <= run <= 1.25 * report.peak_bytes, (run, report.peak_bytes)


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


def test_training_step_allocations_match_the_analysis_in_every_run():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 256], "float64")
        h = x
        for i in range(4):
            h = layers.relu(h @ layers.create_parameter([256, 256], "float64", name=f"w{i}"))
        loss = layers.mean(layers.square(h))
        optimizer.SGD(0.01).minimize(loss)
    feed = {"x": np.random.default_rng(0).standard_normal((64, 256))}
    report = analyze_memory(main, {"x": (64, 256)}, [loss])
    weights = 4 * 256 * 256 * 8
    assert report.peak_bytes >= weights  # the new weights are staged until the commit
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    exe.plan_for(main, ["x"], [loss.name])
    runs = [_traced(lambda: exe.run(main, feed=feed, fetch_list=[loss], scope=scope)) for _ in range(3)]
    for run in runs:  # every run allocates the same: the reference interpreter keeps no buffers
        assert 0.9 * report.peak_bytes <= run <= 1.25 * report.peak_bytes + 64 * 2 ** 10, (runs, report.peak_bytes)


def _mlp_training_program():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 32], "float64")
        w1 = layers.create_parameter([32, 16], "float64", name="w1")
        w2 = layers.create_parameter([16, 4], "float64", name="w2")
        h = layers.tanh(x @ w1)
        loss = layers.reduce_sum(layers.square(h @ w2))
        optimizer.SGD(0.1).minimize(loss)
    return main, loss


def test_every_live_var_has_a_kind_and_the_kinds_add_up():
    main, loss = _mlp_training_program()
    report = analyze_memory(main, {"x": (8, 32)}, [loss])
    assert all(sum(k) == b for k, b in zip(report.kinds_after, report.live_after))
    assert sum(report.peak_by_kind.values()) == report.peak_bytes
    assert report.resting_by_kind == {"feed": 8 * 32 * 8, "parameter": (32 * 16 + 16 * 4) * 8, "optimizer state": 8}
    kinds = {n: report.kind[n] for n in ("x", "tanh_0", "w1", "square_0@GRAD")}
    assert kinds == {"x": "feed", "tanh_0": "activation", "w1": "staged update", "square_0@GRAD": "gradient"}


def test_keeper_is_the_last_step_reading_the_var():
    main, loss = _mlp_training_program()
    report = analyze_memory(main, {"x": (8, 32)}, [loss])
    ops = main.global_block().ops
    last_reader = {}
    for step, k in enumerate(report.op_index):
        for name in ops[k].input_arg_names:
            last_reader[name] = step
    for name in ("tanh_0", "square_0@GRAD"):
        assert report.keeper[name] == last_reader[name]
    assert ops[report.op_index[report.keeper["tanh_0"]]].role == "backward"  # kept alive for the backward part


def test_memory_text_has_kind_columns_and_keepers():
    main, loss = _mlp_training_program()
    text = memory_text(analyze_memory(main, {"x": (8, 32)}, [loss]))
    header = next(line for line in text.splitlines() if line.startswith("step"))
    for column in ("live after", "activation", "gradient", "staged update", "temporary"):
        assert column in header
    assert "kept alive by" in text and "the commit at the end of the run" in text
    assert "not stored" not in text  # every gradient exists: no product is fused into its update
    rows = [line for line in text.splitlines() if line.lstrip().startswith("#")]
    ends = {len(line) for line in rows}
    assert len(ends) == 1  # the right-aligned columns end in the same place on every row


def test_peak_vars_match_a_replay_of_the_plan():
    main, loss = _mlp_training_program()
    report = analyze_memory(main, {"x": (8, 32)}, [loss])
    assert sum(b for _, b in report.at_peak) == report.peak_bytes
    assert report.live_after[report.peak_op] <= report.peak_bytes
