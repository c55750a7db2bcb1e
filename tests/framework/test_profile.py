"""Executor(profile=True): every op in one row, nested time adding up, failed runs left out, no timers when off."""
from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest

from gradgen.framework import ExecutionError, Executor, Scope, optimizer
from gradgen.framework.backend.numpy.kernels import KERNELS
from gradgen.framework.backend.numpy.plan_data import PlanOptions
from gradgen.framework.runtime.profile import PHASES
from gradgen.framework.tools.profile_text import profile_text
from gradgen.program import Program, layers, program_guard
from tests.control_flow.rnn import build as build_rnn, feed_for

from .test_plan_options import _mlp  # a training step

PLAIN = PlanOptions()


def _cond_in_loop():
    """A while loop whose body holds a cond: steps nested two deep, one branch never taken."""
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        n = layers.data("n", [], "int64")
        one = layers.fill_constant([], "int64", 1)

        def body(t, h):
            big = layers.greater_than(t, layers.fill_constant([], "int64", 100))
            return [layers.add(t, one), layers.cond(big, lambda: layers.exp(h), lambda: layers.tanh(h))]

        _, h = layers.while_loop(lambda t, h: layers.less_than(t, n), body, [layers.fill_constant([], "int64", 0), x])
        out = layers.scale(h, 2.0)
    return main, out, {"x": np.linspace(-1.0, 1.0, 3), "n": np.int64(4)}


def _covered(profile) -> list[tuple[int, int]]:
    return sorted((r.block, i) for r in profile.rows for i in r.ops)


def _every_op(program) -> list[tuple[int, int]]:
    return sorted((b.idx, i) for b in program.blocks for i in range(len(b.ops)))


def _adds_up(profile) -> None:
    """Every second once: own times sum to the outermost rows' times, and with what is outside to the runs' time;
    a control-flow row holds at least its nested rows."""
    own = sum(r.own_seconds for r in profile.rows)
    outer = sum(r.seconds for r in profile.rows if r.depth == 0)
    assert math.isclose(own, outer, rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(own + sum(profile.outside.values()), profile.seconds,
                        rel_tol=1e-9, abs_tol=1e-12)
    assert set(profile.outside) == set(PHASES) and all(s >= 0 for s in profile.outside.values())
    for at, row in enumerate(profile.rows):
        nested = []
        for later in profile.rows[at + 1:]:
            if later.depth <= row.depth:
                break
            if later.depth == row.depth + 1:
                nested.append(later.seconds)
        assert row.seconds >= row.own_seconds >= 0
        assert math.isclose(row.seconds - row.own_seconds, sum(nested), rel_tol=1e-9, abs_tol=1e-12)


@pytest.mark.parametrize("options", [PLAIN, PlanOptions(read_back=False)], ids=["default", "recompute"])
@pytest.mark.parametrize("check_types", [False, True])
def test_rows_cover_every_op_once_and_times_add_up_in_a_training_step(options, check_types):
    main, startup, loss, feed = _mlp()
    exe, scope = Executor(profile=True, check_types=check_types, options=options), Scope()
    exe.run(startup, scope=scope)
    losses = [exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0] for _ in range(4)]
    plain = Executor(check_types=check_types, options=options)
    scope2 = Scope()
    plain.run(startup, scope=scope2)
    want = [plain.run(main, feed=feed, fetch_list=[loss], scope=scope2)[0] for _ in range(4)]
    np.testing.assert_array_equal(losses, want)  # profiling changes no number
    profile = exe.profile(main)
    assert _covered(profile) == _every_op(main)
    assert profile.runs == 4 and profile.failed_runs == 0 and profile.plans_built == 1
    assert all(r.calls == 4 for r in profile.rows)
    _adds_up(profile)
    assert exe.profile(startup).runs == 1  # each program has its own profile


@pytest.mark.parametrize("check_types", [False, True])
def test_steps_in_loop_bodies_nest_under_their_op_and_count_every_iteration(check_types):
    main, out, feed = _cond_in_loop()
    exe = Executor(profile=True, check_types=check_types, options=PLAIN)
    for _ in range(2):
        exe.run(main, feed=feed, fetch_list=[out], scope=Scope())
    profile = exe.profile(main)
    assert _covered(profile) == _every_op(main)
    by_op = {(r.block, r.ops): r for r in profile.rows}
    (loop,) = [r for r in profile.rows if r.kind == "while"]
    (branch,) = [r for r in profile.rows if r.kind == "cond"]
    assert loop.depth == 0 and branch.depth == 1 and branch.parent == (0, loop.ops[0])
    assert branch.calls == 2 * 4  # four iterations a run
    tanh = next(r for r in profile.rows if r.kind == "tanh")
    exp = next(r for r in profile.rows if r.kind == "exp")
    assert tanh.depth == exp.depth == 2 and tanh.calls == 8
    assert exp.calls == 0 and exp.seconds == 0.0  # the branch never taken: listed, never timed
    assert by_op[(0, loop.ops)].seconds > sum(r.own_seconds for r in profile.rows if r.depth > 0) > 0
    _adds_up(profile)


def test_rnn_forward_and_gradient_loops():
    main, loss, grads = build_rnn()
    exe = Executor(profile=True, check_types=False, options=PLAIN)
    for _ in range(2):
        exe.run(main, feed=feed_for(5), fetch_list=[loss, *grads], scope=Scope())
    profile = exe.profile(main)
    assert _covered(profile) == _every_op(main)
    assert [r.kind for r in profile.rows if r.depth == 0].count("while") == 2
    _adds_up(profile)


def test_a_failed_run_counts_as_failed_and_adds_no_time():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        out = layers.exp(layers.tanh(layers.scale(x, 2.0)))

    def refuses_negatives(op):
        def run(v):
            if (v < 0).any():
                raise ValueError("negative")
            return np.tanh(v)
        return run

    options = PlanOptions(kernels={**KERNELS, "tanh": refuses_negatives})
    exe = Executor(profile=True, check_types=False, options=options)
    exe.run(main, feed={"x": np.ones(3)}, fetch_list=[out])
    with pytest.raises(ExecutionError, match="negative"):
        exe.run(main, feed={"x": -np.ones(3)}, fetch_list=[out])
    profile = exe.profile(main)
    assert profile.runs == 1 and profile.failed_runs == 1
    assert [r.calls for r in profile.rows] == [1, 1, 1]  # the scale that ran before the failure is not counted
    _adds_up(profile)
    exe.run(main, feed={"x": np.ones(3)}, fetch_list=[out])
    assert [r.calls for r in exe.profile(main).rows] == [2, 2, 2]
    assert "1 failed runs not counted" in profile_text(main, exe.profile(main))


def test_reset_forgets_and_an_edited_program_starts_over():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        out = layers.tanh(x)
    exe = Executor(profile=True)
    exe.run(main, feed={"x": np.ones(3)}, fetch_list=[out])
    exe.reset_profile()
    profile = exe.profile(main)
    assert profile.runs == 0 and profile.seconds == 0 and [r.calls for r in profile.rows] == [0]
    assert "no completed runs" in profile_text(main, profile)
    exe.run(main, feed={"x": np.ones(3)}, fetch_list=[out])
    assert exe.profile(main).runs == 1 and exe.profile(main).plans_built == 0  # the plan was kept
    with program_guard(main, Program()):
        out2 = layers.exp(out)
    exe.run(main, feed={"x": np.ones(3)}, fetch_list=[out2])
    profile = exe.profile(main)
    assert profile.runs == 1 and profile.plans_built == 1 and [r.kind for r in profile.rows] == ["tanh", "exp"]


def test_an_executor_without_profile_has_no_timers():
    main, startup, loss, feed = _mlp()
    exe, scope = Executor(check_types=False, options=PLAIN), Scope()
    exe.run(startup, scope=scope)
    plan = exe.plan_for(main, list(feed), [loss.name])
    assert plan.options.profile is None
    assert not any("timed" in step.fn.__qualname__ for step in plan.steps)
    with pytest.raises(ExecutionError, match="profile=True"):
        exe.profile(main)
    profiled = Executor(profile=True, check_types=False, options=PLAIN).plan_for(main, list(feed), [loss.name])
    assert all("timed" in step.fn.__qualname__ for step in profiled.steps)


def test_the_printed_profile_names_ops_by_type_by_step_and_outside():
    main, out, feed = _cond_in_loop()
    exe = Executor(profile=True, options=PLAIN)
    exe.run(main, feed=feed, fetch_list=[out], scope=Scope())
    text = profile_text(main, exe.profile(main))
    assert "by op type" in text and "by step" in text and "outside the ops" in text
    assert "test_profile.py:" in text  # the ops' source lines
    indents = {m.group(2): len(m.group(1)) for m in re.finditer(r"\d  ( *)block \d+, op #\d+ \((\w+)\)", text)}
    assert indents["while"] == 0 and indents["cond"] == 2 and indents["tanh"] == indents["exp"] == 4
    for phase in PHASES.values():
        assert phase in text


def _product_program():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 8], "float32")
        out = layers.reduce_sum(layers.matmul(x, x, transpose_y=True))
    return main, out, {"x": np.ones((4, 8), np.float32)}


def test_the_profile_counts_runs_by_the_threads_the_meter_left(monkeypatch):
    """Each counted run's pool count, as the free-core meter gave it (here one core free, then two), and none for a
    run that failed; the printed profile says it."""
    from gradgen.framework.backend.numpy import runner
    main, out, feed = _product_program()
    free = iter([1, 1, 2, 2, 2, 1])
    monkeypatch.setattr(runner, "cores_for_runs", lambda: next(free))
    exe = Executor(backend="numpy", profile=True)
    for _ in range(5):
        exe.run(main, feed=feed, fetch_list=[out], scope=Scope())
    with pytest.raises(Exception):
        exe.run(main, feed={"x": np.ones((4, 3), np.float32)}, fetch_list=[out], scope=Scope())
    profile = exe.profile(main)
    assert profile.runs == 5 and profile.failed_runs == 1
    assert profile.threads == ((2, 3), (1, 2))
    assert "threads: runs by the engine's pool count: 3 on 2, 2 on 1" in profile_text(main, profile)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_the_profile_counts_the_threads_the_executor_set(backend):
    """Executor(threads=1): every run on one thread (XLA's pool: test_threads.py's probe, in a process of its own)."""
    if backend == "torch":
        from tests.backends.test_torch_backend import need_torch
        need_torch()
    main, out, feed = _product_program()
    exe = Executor(backend=backend, threads=1, profile=True)
    for _ in range(3):
        exe.run(main, feed=feed, fetch_list=[out], scope=Scope())
    assert exe.profile(main).threads == ((1, 3),)



def _two_convs():
    """A training step whose second convolution's input and filter gradients run as one torch kernel."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 1, 8, 8], "float32")
        h = layers.relu(layers.conv2d(x, 4, 3, padding=1))
        loss = layers.mean(layers.conv2d(h, 2, 3))
        optimizer.SGD(0.1).minimize(loss)
    return main, startup, loss, {"x": np.random.default_rng(0).standard_normal((2, 1, 8, 8)).astype(np.float32)}


def test_the_torch_engine_profiles_each_op_and_each_joint_kernel_once():
    """The torch engine walks op by op: its profile has a row per op as the numpy engine's, a joint kernel one
    row for its two ops, and the times add up as they do there."""
    from tests.backends.test_torch_backend import need_torch
    need_torch()
    main, startup, loss, feed = _two_convs()
    losses = {}
    for profiled in (True, False):
        exe, scope = Executor(backend="torch", profile=profiled), Scope()
        exe.run(startup, scope=scope)
        losses[profiled] = [exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0] for _ in range(3)]
        if profiled:
            profile = exe.profile(main)
    np.testing.assert_array_equal(losses[True], losses[False])  # profiling changes no number
    assert _covered(profile) == _every_op(main)
    assert profile.runs == 3 and all(r.calls == 3 for r in profile.rows)
    joint = [r for r in profile.rows if len(r.ops) == 2]
    assert [r.kind for r in joint] == ["conv2d_input_grad+conv2d_filter_grad"]
    assert [main.global_block().ops[i].type for i in joint[0].ops] == ["conv2d_input_grad", "conv2d_filter_grad"]
    _adds_up(profile)
    text = profile_text(main, profile)
    assert "conv2d_input_grad+conv2d_filter_grad" in text and "no op rows" not in text


def test_rows_of_two_engines_stay_apart_and_the_text_names_the_engine():
    """Under ``backend="auto"`` an op runs on the numpy trial and on the torch engine: a row for each, and the
    printed tables gain an engine column (a profile of one engine has none)."""
    from gradgen.framework.runtime.profile import Profiler

    main = _two_convs()[0]
    block, profiler = main.global_block(), Profiler()
    on_numpy = profiler.timed(lambda: None, block, (0,), "conv2d", "numpy")
    on_torch = profiler.timed(lambda: None, block, (0,), "conv2d", "torch")
    for steps in ([on_numpy], [on_torch, on_torch]):
        with profiler.run(main) as mark:
            for step in steps:
                step()
            for phase in PHASES:
                mark(phase)
    profile = profiler.profile(main)
    assert [(r.ops, r.engine, r.calls) for r in profile.rows] == [((0,), "numpy", 1), ((0,), "torch", 2)]
    _adds_up(profile)
    text = profile_text(main, profile)
    assert re.search(r"calls/run +engine +op type", text) and re.search(r" numpy +conv2d\n", text)
    assert re.search(r" torch +block 0, op #0 \(conv2d\)", text)
    assert "engine" not in profile_text(main, dataclasses.replace(profile, rows=profile.rows[:1]))


def test_the_torch_engines_choice_of_product_shows_in_the_plan_phase_not_in_a_product_row(monkeypatch):
    """The torch engine times torch's product against numpy's once per thread count in a process (``linalg.
    torch_is_faster``, ~0.2 s): a run does that before its first step, so a profile puts it in the plan phase
    and the matmul row holds the product alone (it made matmul 66 % of `gradgen example cnn --profile`)."""
    from tests.backends.test_torch_backend import need_torch
    need_torch()
    from gradgen.framework.backend.torch.kernels import linalg
    monkeypatch.setattr(linalg, "_faster", {})  # as in a fresh process
    monkeypatch.setattr(linalg, "_POOLS_SETTLE_SECONDS", 0.3)
    timings = []
    timed = linalg._best_pair
    monkeypatch.setattr(linalg, "_best_pair", lambda *args: timings.append(1) or timed(*args))
    main, out, feed = _product_program()
    exe = Executor(backend="torch", profile=True)
    exe.run(main, feed=feed, fetch_list=[out], scope=Scope())
    profile = exe.profile(main)
    (product,) = [r for r in profile.rows if r.kind == "matmul"]
    assert profile.outside["plan"] >= 0.3 > product.seconds
    measured = len(timings)
    assert measured >= 1
    exe.run(main, feed=feed, fetch_list=[out], scope=Scope())
    assert len(timings) == measured  # once a process: the next run looks it up
