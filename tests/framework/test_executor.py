"""Executor behaviour: feeds, fetches, scope, plan reuse, release of intermediates, the two-layer net."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from gradgen.framework import Executor, Scope
from gradgen.framework.backend.numpy.plan_data import PlanOptions
from gradgen.program import Program, initializer, layers, program_guard


def _chain_program(length: int, fetch_all: bool = False):
    """x -> scale -> scale -> ... (``length`` ops), over float64 arrays."""
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", shape=[-1], dtype="float64")
        outs, h = [], x
        for _ in range(length):
            h = layers.scale(h, scale=1.0001)
            outs.append(h)
    return main, (outs if fetch_all else [h])


def test_run_returns_fetches_in_order_and_accepts_names():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", shape=[2, 3], dtype="float64")
        y = layers.exp(x)
        z = layers.reduce_sum(y)
    xs = np.arange(6.0).reshape(2, 3)
    got_z, got_y = Executor().run(main, feed={"x": xs}, fetch_list=[z, y.name], scope=Scope())
    np.testing.assert_allclose(got_y, np.exp(xs))
    np.testing.assert_allclose(got_z, np.exp(xs).sum())
    assert isinstance(got_z, np.ndarray)


def test_default_program_and_scope_are_used(monkeypatch):
    from gradgen.program import guard
    import gradgen.framework.runtime.scope as scope_module

    main, scope = Program(), Scope()
    monkeypatch.setattr(guard, "_main_program", main)
    monkeypatch.setattr(scope_module, "_GLOBAL_SCOPE", scope)
    w = layers.create_parameter([2], "float64", name="w", initializer=initializer.Constant(3.0))
    out = layers.scale(w, scale=2.0)
    scope.set("w", np.array([1.0, 2.0]))
    (got,) = Executor().run(fetch_list=[out])
    np.testing.assert_array_equal(got, [2.0, 4.0])


def test_persistable_values_persist_and_others_do_not():
    main = Program()
    with program_guard(main, Program()):
        w = layers.create_parameter([3], "float64", name="w")
        h = layers.scale(w, scale=2.0)
        layers.assign(h, output=w)  # w <- 2 w
    scope = Scope()
    scope.set("w", np.ones(3))
    exe = Executor()
    exe.run(main, scope=scope)
    exe.run(main, scope=scope)
    np.testing.assert_array_equal(scope["w"], [4.0, 4.0, 4.0])
    assert h.name not in scope
    assert list(scope) == ["w"]


def test_fetched_persistable_value_is_a_copy():
    main = Program()
    with program_guard(main, Program()):
        w = layers.create_parameter([2], "float64", name="w")
    scope = Scope()
    scope.set("w", np.zeros(2))
    (got,) = Executor().run(main, fetch_list=[w], scope=scope)
    got[0] = 7.0
    assert scope["w"][0] == 0.0


def test_second_run_does_no_replanning_and_changes_invalidate():
    main, (last,) = _chain_program(3)
    exe, scope = Executor(), Scope()
    feed = {"x": np.ones(4)}
    exe.run(main, feed=feed, fetch_list=[last], scope=scope)
    assert exe.plans_built == 1
    exe.run(main, feed={"x": np.zeros(5)}, fetch_list=[last], scope=scope)
    assert exe.plans_built == 1
    exe.run(main, feed=feed, fetch_list=[], scope=scope)  # other fetch names: another plan
    assert exe.plans_built == 2
    with program_guard(main, Program()):
        last = layers.scale(last, scale=2.0)  # the program changed: the plan is stale
    (got,) = exe.run(main, feed=feed, fetch_list=[last], scope=scope)
    assert exe.plans_built == 3
    np.testing.assert_allclose(got, 2.0 * 1.0001 ** 3 * np.ones(4))


def test_intermediates_are_released_after_last_use():
    n = 1 << 17  # 1 MiB of float64
    xs = np.ones(n)
    main, (last,) = _chain_program(100)
    exe, scope = Executor(), Scope()
    exe.run(main, feed={"x": xs}, fetch_list=[last], scope=scope)  # plan built outside the measurement
    tracemalloc.start()
    exe.run(main, feed={"x": xs}, fetch_list=[last], scope=scope)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 3.5 * xs.nbytes, f"peak {peak / xs.nbytes:.1f} MiB over a chain of 100 1-MiB ops"

    # The same measurement sees everything when every intermediate is fetched (so kept alive).
    main_all, outs = _chain_program(100, fetch_all=True)
    exe.run(main_all, feed={"x": xs}, fetch_list=outs, scope=scope)
    tracemalloc.start()
    exe.run(main_all, feed={"x": xs}, fetch_list=outs, scope=scope)
    _, peak_all = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak_all > 90 * xs.nbytes


def test_plan_marks_dead_vars():
    main, (last,) = _chain_program(3)
    plan = Executor(options=PlanOptions()).plan_for(main, ["x"], [last.name])
    ops = main.global_block().ops
    assert plan.steps[0].dead == ("x",)
    assert plan.steps[1].dead == (ops[0].output("Out")[0],)
    assert plan.steps[2].dead == (ops[1].output("Out")[0],)


def test_two_layer_network_matches_numpy():
    N, D_in, H, D_out = 64, 1000, 100, 10
    rng = np.random.default_rng(0)
    xs, ys = rng.standard_normal((N, D_in)), rng.standard_normal((N, D_out))
    w1, w2 = rng.standard_normal((D_in, H)), rng.standard_normal((H, D_out))
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", shape=[-1, D_in], dtype="float64")
        y = layers.data("y", shape=[-1, D_out], dtype="float64")
        p1 = layers.create_parameter([D_in, H], "float64", name="w1")
        p2 = layers.create_parameter([H, D_out], "float64", name="w2")
        y_pred = layers.relu(x @ p1) @ p2
        loss = layers.reduce_sum(layers.square(y_pred - y))
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    assert scope["w1"].shape == (D_in, H)
    scope.set("w1", w1)
    scope.set("w2", w2)
    got_loss, got_pred = exe.run(main, feed={"x": xs, "y": ys}, fetch_list=[loss, y_pred], scope=scope)
    want_pred = np.maximum(xs @ w1, 0) @ w2
    want_loss = np.square(want_pred - ys).sum()
    np.testing.assert_allclose(got_pred, want_pred, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_loss, want_loss, rtol=1e-12)


def test_committed_values_do_not_alias_feeds_or_views():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", shape=[2, 2], dtype="float64")
        w = layers.create_parameter([2, 2], "float64", name="w")
        layers.assign(x, output=w)
    xs, scope = np.zeros((2, 2)), Scope()
    scope.set("w", np.ones((2, 2)))
    Executor().run(main, feed={"x": xs}, scope=scope)
    xs[0, 0] = 9.0
    np.testing.assert_array_equal(scope["w"], np.zeros((2, 2)))


def test_feeding_a_persistable_var_overrides_it_for_one_run_only():
    main = Program()
    with program_guard(main, Program()):
        w = layers.create_parameter([2], "float64", name="w")
        out = layers.scale(w, scale=3.0)
    scope = Scope()
    scope.set("w", np.ones(2))
    (got,) = Executor().run(main, feed={"w": np.full(2, 2.0)}, fetch_list=[out], scope=scope)
    np.testing.assert_array_equal(got, [6.0, 6.0])
    np.testing.assert_array_equal(scope["w"], [1.0, 1.0])
