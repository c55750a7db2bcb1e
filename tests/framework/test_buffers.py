"""The run order (updates hoisted), plan-owned buffers and double-buffered updates: same numbers, no surprises."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import ExecutionError, Executor, Scope, optimizer
from gradgen.framework.backend.numpy.kernels import KERNELS
from gradgen.framework.backend.numpy.plan import build_plan
from gradgen.framework.backend.numpy.plan_data import PlanOptions
from gradgen.framework.backend.numpy.run import run_plan
from gradgen.framework.backend.numpy.schedule import schedule
from gradgen.program import Program, layers, program_guard
from gradgen.program.initializer import Normal

GEMM_ONLY = PlanOptions(regions=False)  # one op per step (groups, regions: tests/perf)


def _mlp(dtype="float64", opt=None, d_in=30, h=20, d_out=3, lr=0.01, batch=16):
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, d_in], dtype)
        y = layers.data("y", [-1, d_out], dtype)
        w1 = layers.create_parameter([d_in, h], dtype, name="w1", initializer=Normal(0.0, 0.1, seed=1))
        w2 = layers.create_parameter([h, d_out], dtype, name="w2", initializer=Normal(0.0, 0.1, seed=2))
        loss = layers.reduce_sum(layers.square(layers.relu(x @ w1) @ w2 - y))
        (opt or optimizer.SGD(lr)).minimize(loss)
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((batch, d_in)).astype(dtype),
            "y": rng.standard_normal((batch, d_out)).astype(dtype)}
    return main, startup, loss, feed


def _reference_step(block, env: dict) -> None:
    """Every op's plain kernel in block order, nothing reused or reordered: what a run must equal exactly."""
    for op in block.ops:
        result = KERNELS[op.type](op)(*[env[n] for n in op.input_arg_names])
        outs = op.output_arg_names
        for n, v in zip(outs, (result,) if len(outs) == 1 else result):
            env[n] = v


def test_updates_run_right_after_their_gradient_is_complete():
    main, _, _, _ = _mlp()
    ops = main.global_block().ops
    order = schedule(ops)
    assert sorted(order) == list(range(len(ops)))
    for at, i in enumerate(order):
        if ops[i].type == "sgd":
            grad = ops[i].input("Grad")[0]
            before = ops[order[at - 1]]
            # the op just before writes the gradient or reads the old parameter: nothing could move it higher
            assert grad in before.output_arg_names or ops[i].input("Param")[0] in before.input_arg_names
    assert order != list(range(len(ops)))  # w2's update no longer waits for w1's gradient


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("make_opt", [lambda: optimizer.SGD(0.01), lambda: optimizer.Momentum(0.01, 0.9),
                                      lambda: optimizer.Momentum(0.01, 0.9, use_nesterov=True),
                                      lambda: optimizer.Adam(0.01)])
def test_runs_equal_the_plain_kernels_in_block_order_exactly(dtype, make_opt):
    main, startup, loss, feed = _mlp(dtype, make_opt())
    exe, scope = Executor(options=PlanOptions(fuse=False)), Scope()  # fusion rounds differently: tested below
    exe.run(startup, scope=scope)
    env = {n: scope[n].copy() for n in scope}
    for _ in range(4):  # several runs: buffers and swapped parameters are reused from the second on
        (got,) = exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
        env.update(feed)
        _reference_step(main.global_block(), env)
        np.testing.assert_array_equal(got, env[loss.name])
    for name in scope:
        np.testing.assert_array_equal(scope[name], env[name], err_msg=name)


@pytest.mark.parametrize("dtype,rtol", [("float64", 1e-12), ("float32", 1e-5)])
def test_weight_gradient_product_fuses_into_its_sgd_update(dtype, rtol):
    main, startup, loss, feed = _mlp(dtype, d_in=40, h=30)
    plan = build_plan(main.global_block(), list(feed), [loss.name], GEMM_ONLY)
    ops = main.global_block().ops
    fused = [s for s in plan.steps if ops[s.index].type == "sgd" and len(s.ins) == 4]
    assert len(plan.steps) == len(ops) - 2 and len(fused) == 2  # both weight gradients are never materialised
    assert not {"w1@GRAD", "w2@GRAD"} & {n for s in plan.steps for n in s.outs}
    assert all(len(s.ops) == 2 and ops[s.ops[0]].type == "matmul" and s.ops[1] == s.index for s in fused)

    def train(exe):
        scope = Scope()
        exe.run(startup, scope=scope)
        losses = [exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0] for _ in range(4)]
        return losses, scope

    fused_losses, fused_scope = train(Executor(options=GEMM_ONLY))
    plain_losses, plain_scope = train(Executor(options=PlanOptions(fuse=False)))
    np.testing.assert_allclose(fused_losses, plain_losses, rtol=rtol)
    for name in ("w1", "w2"):
        np.testing.assert_allclose(fused_scope[name], plain_scope[name], rtol=rtol, atol=rtol * 1e-2)


def test_no_fusion_when_the_gradient_is_fetched():
    main, _, loss, feed = _mlp()
    plan = build_plan(main.global_block(), list(feed), [loss.name, "w1@GRAD"], GEMM_ONLY)
    assert len(plan.steps) == len(main.global_block().ops) - 1  # only w2's product is fused


@pytest.mark.parametrize("check_types", [True, False])  # unchecked, the last update may go in place (in_place.py)
def test_an_array_read_from_the_scope_keeps_its_values_across_runs(check_types):
    main, startup, loss, feed = _mlp()
    exe, scope = Executor(check_types=check_types), Scope()
    exe.run(startup, scope=scope)
    for _ in range(2):
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    held = scope["w1"]
    kept = held.copy()
    for _ in range(3):
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    np.testing.assert_array_equal(held, kept)
    assert scope["w1"] is not held and not np.array_equal(scope["w1"], kept)


@pytest.mark.parametrize("make_opt,var", [(lambda: optimizer.SGD(0.01), "w1"),
                                          (lambda: optimizer.Momentum(0.01, 0.9), "w1"),
                                          (lambda: optimizer.Momentum(0.01, 0.9), "velocity"),
                                          (lambda: optimizer.Adam(0.01), "w1"),
                                          (lambda: optimizer.Adam(0.01), "moment")])
def test_updates_swap_two_buffers_when_nobody_holds_the_old_one(make_opt, var):
    main, startup, loss, feed = _mlp(opt=make_opt())
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    buffers = exe.plan_for(main, list(feed), [loss.name]).buffers
    name = var if var in buffers.swaps else next(n for n in buffers.swaps if var in n)
    slot = buffers.swaps[name]
    for _ in range(3):
        spare, current = id(buffers.slots[slot]), id(scope.own(name))
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
        assert id(scope.own(name)) == spare and id(buffers.slots[slot]) == current


def test_failed_run_after_an_in_place_update_leaves_the_scope_untouched():
    main, startup, loss, feed = _mlp()
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed=feed, fetch_list=[loss], scope=scope)  # buffers now exist and will be written into
    before = {n: scope[n].copy() for n in scope}
    with program_guard(main, Program()):
        a = layers.data("a", [2, -1], "float64")
        b = layers.data("b", [-1, 2], "float64")
        clash = layers.matmul(a, b)  # the last op; its run-time shapes clash, after both updates ran
    bad = dict(feed, a=np.ones((2, 3)), b=np.ones((4, 2)))
    with pytest.raises(ExecutionError, match="matmul"):
        exe.run(main, feed=bad, fetch_list=[loss, clash], scope=scope)
    for n in scope:
        np.testing.assert_array_equal(scope[n], before[n], err_msg=n)


def test_a_held_fetch_that_views_a_plan_buffer_is_never_overwritten():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 64], "float64")
        flat = layers.reshape(layers.relu(x * 2.0), [-1])  # reshape returns a view of relu's slot
    exe, scope = Executor(), Scope()
    first = exe.run(main, feed={"x": np.ones((32, 64))}, fetch_list=[flat], scope=scope, return_numpy=False)[0]
    for _ in range(2):
        exe.run(main, feed={"x": -np.ones((32, 64))}, fetch_list=[flat], scope=scope)
    np.testing.assert_array_equal(first, np.full(32 * 64, 2.0))


def test_buffers_are_shared_by_vars_whose_lifetimes_do_not_overlap():
    main = Program()
    with program_guard(main, Program()):
        h = layers.data("x", [-1, 256], "float64")
        for _ in range(10):
            h = layers.relu(h)
        out = layers.reduce_sum(h)
    plan = build_plan(main.global_block(), ["x"], [out.name], GEMM_ONLY)
    assert len(plan.buffers.slots) == 2 and len(plan.buffers.by_step) == 10


def test_run_plan_runs_a_plan_on_a_plain_dict_and_locates_errors():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 3], "float64")
        z = layers.data("z", [3, 2], "float64")
        y = layers.exp(x) @ z
    plan = build_plan(main.global_block(), ["x", "z"], [y.name])
    env = {"x": np.zeros((2, 3)), "z": np.ones((3, 2))}
    run_plan(plan, env)
    np.testing.assert_array_equal(env[y.name], np.full((2, 2), 3.0))
    assert "x" not in env and "z" not in env  # dead after their last use
    with pytest.raises(ExecutionError, match=r"block 0, op #1 \(matmul\).*inputs: X=exp_0: float64\[2, 4\]"):
        run_plan(plan, {"x": np.zeros((2, 4)), "z": np.ones((3, 2))})
