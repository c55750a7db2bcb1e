"""The run's trailing product-and-update steps write onto the scope's arrays: same numbers, nothing torn or shared."""
from __future__ import annotations

import _thread
import random
import threading
import time

import numpy as np
import pytest

from gradgen.framework import ExecutionError, Executor, Scope, optimizer
from gradgen.framework.runtime.commit import held_interrupts
from gradgen.framework.backend.numpy.plan_data import PlanOptions
from gradgen.program import Program, layers, program_guard
from tests.framework.test_buffers import _mlp as _buffers_mlp

D_IN, H, D_OUT = 300, 100, 10  # w1's gradient product (300x64 by 64x100) is large enough for the BLAS provider


def _mlp(dtype="float64", opt=None, lr=1e-3):
    return _buffers_mlp(dtype, opt, d_in=D_IN, h=H, d_out=D_OUT, lr=lr, batch=64)


def _trained(exe, steps=4, dtype="float64", hold=False):
    main, startup, loss, feed = _mlp(dtype)
    scope = Scope()
    exe.run(startup, scope=scope)
    first = scope.own("w1")
    held = first if hold else None
    del first
    ids, losses = [], []
    for _ in range(steps):
        losses.append(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0])
        ids.append(id(scope.own("w1")))
    return losses, scope, ids, held


def test_the_tail_is_the_last_product_and_update_and_only_for_unchecked_plans():
    main, _, loss, feed = _mlp()
    plan = Executor(check_types=False).plan_for(main, list(feed), [loss.name])
    ops = main.global_block().ops
    assert len(plan.in_place) == 1 and len(plan.head) == len(plan.steps) - 1
    (last,) = plan.steps[len(plan.head):]
    assert [ops[i].type for i in last.ops] == ["matmul", "sgd"] and last.out == "w1"
    assert not Executor(check_types=True).plan_for(main, list(feed), [loss.name]).in_place
    assert not Executor(check_types=False, options=PlanOptions(fuse=False)).plan_for(main, list(feed),
                                                                                       [loss.name]).in_place


@pytest.mark.parametrize("dtype,rtol", [("float64", 1e-12), ("float32", 1e-5)])
def test_in_place_runs_equal_runs_that_fuse_nothing_and_write_the_scope_array_itself(dtype, rtol):
    losses, scope, ids, _ = _trained(Executor(check_types=False), dtype=dtype)
    plain_losses, plain_scope, _, _ = _trained(Executor(check_types=False, options=PlanOptions(fuse=False)),
                                               dtype=dtype)
    np.testing.assert_allclose(losses, plain_losses, rtol=rtol)
    for name in ("w1", "w2"):
        np.testing.assert_allclose(scope[name], plain_scope[name], rtol=rtol,
                                   atol=rtol * np.abs(plain_scope[name]).max())
    assert len(set(ids)) == 1  # w1 was updated where it lies: no copy, no second buffer


def test_in_place_and_double_buffered_updates_agree():
    in_place, scope, _, _ = _trained(Executor(check_types=False))
    double, held_scope, ids, held = _trained(Executor(check_types=False), hold=True)
    assert held is not None and len(set(ids)) > 1  # a held array sends the run down the double-buffered path
    # The same GEMM either way; MKL may still round differently with the arrays' alignment (no CNR mode).
    np.testing.assert_allclose(in_place, double, rtol=1e-12)
    np.testing.assert_allclose(scope["w1"], held_scope["w1"], rtol=1e-12, atol=1e-14)


def test_a_fed_parameter_and_a_parent_scopes_parameter_are_never_written():
    main, startup, loss, feed = _mlp()
    exe, parent = Executor(check_types=False), Scope()
    exe.run(startup, scope=parent)
    w1 = parent["w1"].copy()
    exe.run(main, feed=dict(feed, w1=w1), fetch_list=[loss], scope=parent)
    np.testing.assert_array_equal(w1, parent["w1"])  # the fed array is the caller's: never written
    child = parent.new_scope()
    before = parent["w1"].copy()
    exe.run(main, feed=feed, fetch_list=[loss], scope=child)
    np.testing.assert_array_equal(parent["w1"], before)  # the child's update lands in the child
    assert not np.array_equal(child.own("w1"), before)


def test_a_failing_run_writes_nothing_in_place():
    main, startup, loss, feed = _mlp()
    exe, scope = Executor(check_types=False), Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    before = {n: scope[n].copy() for n in scope}
    with pytest.raises(ExecutionError):
        exe.run(main, feed=dict(feed, y=np.ones((63, D_OUT))), fetch_list=[loss], scope=scope)  # 64 rows vs 63
    for n in scope:
        np.testing.assert_array_equal(scope[n], before[n], err_msg=n)


def test_runs_from_another_thread_also_go_in_place():
    results = []
    # Regions compiled by the run that asks, in both: a background compile would make which runs use the region
    # (and so the last bit of a fused sum) depend on timing.
    options = PlanOptions(background_compile=False)
    thread = threading.Thread(target=lambda: results.append(_trained(Executor(check_types=False, options=options))))
    thread.start()
    thread.join()
    losses, scope, ids, _ = results[0]
    assert len(set(ids)) == 1
    np.testing.assert_array_equal(losses, _trained(Executor(check_types=False, options=options))[0])


def test_held_interrupts_delivers_the_interrupt_after_the_block():
    done = []
    with pytest.raises(KeyboardInterrupt):
        with held_interrupts():
            _thread.interrupt_main()
            time.sleep(0.01)  # a pending interrupt would be raised here without the hold
            done.append(True)
    assert done == [True]


def test_a_nested_hold_delivers_after_the_outer_block():
    done = []
    with pytest.raises(KeyboardInterrupt):
        with held_interrupts():
            with held_interrupts():
                _thread.interrupt_main()
                time.sleep(0.01)
            time.sleep(0.01)  # still held: the inner block's end must not deliver it
            done.append(True)
    assert done == [True]


def _counting_model():
    """Every step subtracts exactly colsum(x) from each column of w1 (a product written in place) and exactly 1
    from p (a plain update, double-buffered): integers, so any BLAS computes them exactly."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, D_IN], "float64")
        p = layers.create_parameter([4], "float64", name="p")
        w1 = layers.create_parameter([D_IN, H], "float64", name="w1")
        loss = layers.reduce_sum(x @ w1) + layers.reduce_sum(p)
        optimizer.SGD(1.0).minimize(loss)
    x = np.random.default_rng(0).integers(0, 4, (64, D_IN)).astype("float64")
    return main, startup, {"x": x}, x.sum(axis=0)


def test_interrupts_at_random_moments_leave_every_parameter_at_one_step():
    main, startup, feed, colsum = _counting_model()
    exe, scope = Executor(check_types=False), Scope()
    exe.run(startup, scope=scope)
    scope.set("p", np.zeros(4))
    scope.set("w1", np.zeros((D_IN, H)))
    assert exe.plan_for(main, ["x"], []).in_place  # w1's update is the tail, p's is not
    started = time.perf_counter()
    for _ in range(20):
        exe.run(main, feed=feed, scope=scope)
    per_run = (time.perf_counter() - started) / 20

    def step_of(scope) -> int:
        steps = {float(v) for v in -scope["p"]} | {float(v) for v in (-scope["w1"] / colsum[:, None]).ravel()}
        assert len(steps) == 1, f"parameters at steps {sorted(steps)}"
        (step,) = steps
        assert step.is_integer()
        return int(step)

    rng = random.Random(0)
    last = step_of(scope)
    for _ in range(60):
        timer = threading.Timer(rng.uniform(0.0, 3 * per_run), _thread.interrupt_main)
        try:
            timer.start()  # inside the try: a tiny delay can interrupt start() itself
            while True:  # only the interrupt ends this loop, so it lands inside some run
                exe.run(main, feed=feed, scope=scope)
        except KeyboardInterrupt:
            pass
        timer.join()
        now = step_of(scope)
        assert now >= last
        last = now
    assert last > 40  # training went on between the interrupts


def _deep_mlp(layers_count=4, width=160, read_after_update=False):
    """relu(h @ w_i) x layers_count, squared error, SGD: each weight outweighs its product's operands (batch 8)."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        h = x = layers.data("x", [-1, width], "float64")
        y = layers.data("y", [-1, width], "float64")
        weights = [layers.create_parameter([width, width], "float64", name=f"w{i}") for i in range(layers_count)]
        for w in weights:
            h = layers.relu(h @ w)
        loss = layers.reduce_sum(layers.square(h - y))
        optimizer.SGD(0.01).minimize(loss)
        after = layers.reduce_sum(weights[0]) if read_after_update else None  # reads w0 as updated
    rng = np.random.default_rng(3)
    feed = {"x": rng.standard_normal((8, width)), "y": rng.standard_normal((8, width))}
    return main, startup, [loss] + ([after] if after is not None else []), feed


def _train(main, startup, fetches, feed, options=None, steps=3):
    exe, scope = Executor(check_types=False, options=options), Scope()
    exe.run(startup, scope=scope)
    got = [exe.run(main, feed=feed, fetch_list=fetches, scope=scope) for _ in range(steps)]
    plan = exe.plan_for(main, list(feed), [v.name for v in fetches])
    return got, scope, plan


def test_updates_whose_parameter_outweighs_its_operands_sink_to_the_tail_and_keep_no_spare_copy():
    main, startup, fetches, feed = _deep_mlp()
    got, scope, plan = _train(main, startup, fetches, feed)
    want, plain_scope, _ = _train(main, startup, fetches, feed, PlanOptions(fuse=False))
    assert [s.out for s in plan.steps[len(plan.head):]] == ["w3", "w2", "w1", "w0"]  # every update, in order
    np.testing.assert_allclose(got, want, rtol=1e-12)
    for i in range(4):
        np.testing.assert_allclose(scope[f"w{i}"], plain_scope[f"w{i}"], rtol=1e-12, atol=1e-14)
    # Written where they lie: the plan holds no weight-sized spare buffer for a double-buffered update.
    assert all(a.shape != (160, 160) for a in plan.buffers.slots if a is not None)


def test_an_update_read_after_it_in_block_order_stays_where_the_reader_sees_the_new_value():
    main, startup, fetches, feed = _deep_mlp(read_after_update=True)
    got, _, plan = _train(main, startup, fetches, feed)
    want, _, _ = _train(main, startup, fetches, feed, PlanOptions(fuse=False))
    assert "w0" not in [s.out for s in plan.steps[len(plan.head):]]
    np.testing.assert_allclose(got, want, rtol=1e-12)
