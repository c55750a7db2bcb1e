"""PlanOptions switch the plan's stages on and off, and every combination computes the same numbers."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import ExecutionError, Executor, NanInfError, Scope, optimizer
from gradgen.framework.backend.numpy.checks import declared_type, finite
from gradgen.framework.backend.numpy.kernels import KERNELS
from gradgen.framework.backend.numpy.plan import build_plan
from gradgen.framework.backend.numpy.plan_data import PlanOptions
from gradgen.program import Program, layers, program_guard
from gradgen.program.initializer import Normal


def _mlp(dtype="float64"):
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 30], dtype)
        w1 = layers.create_parameter([30, 20], dtype, name="w1", initializer=Normal(0.0, 0.1, seed=1))
        w2 = layers.create_parameter([20, 3], dtype, name="w2", initializer=Normal(0.0, 0.1, seed=2))
        loss = layers.reduce_sum(layers.square(layers.tanh(x @ w1) @ w2))
        optimizer.SGD(0.01).minimize(loss)
    feed = {"x": np.random.default_rng(0).standard_normal((16, 30)).astype(dtype)}
    return main, startup, loss, feed


def _train(options: PlanOptions, steps: int = 3):
    main, startup, loss, feed = _mlp()
    exe, scope = Executor(options=options), Scope()
    exe.run(startup, scope=scope)
    losses = [exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0] for _ in range(steps)]
    return losses, {n: scope[n] for n in ("w1", "w2")}


def test_the_plan_runs_every_op_once_in_block_order():
    """The reference interpreter reorders nothing and fuses nothing: one step per op, in block order."""
    main, _, loss, feed = _mlp()
    block = main.global_block()
    plan = build_plan(block, list(feed), [loss.name], PlanOptions())
    assert [s.index for s in plan.steps] == list(range(len(block.ops)))


def test_a_read_back_plan_and_a_recomputing_one_train_alike():
    want_losses, want = _train(PlanOptions(read_back=False))
    losses, got = _train(PlanOptions())
    np.testing.assert_array_equal(losses, want_losses)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


def test_an_unchecked_plan_calls_the_kernel_itself():
    """No check and no buffer: the step's function is the very function the kernel factory returned."""
    main = Program()
    with program_guard(main, Program()):
        y = layers.tanh(layers.data("x", [4], "float64"))
    plan = build_plan(main.global_block(), ["x"], [y.name], PlanOptions())
    made = KERNELS["tanh"](main.global_block().ops[0])
    assert plan.steps[0].fn.__code__ is made.__code__  # the factory's own function, no wrapper
    checked = build_plan(main.global_block(), ["x"], [y.name], PlanOptions(checks=(finite,)))
    assert checked.steps[0].fn.__code__ is not made.__code__


def test_checks_run_on_every_output_in_the_order_given():
    main, startup, loss, feed = _mlp()
    seen = []

    def first(where, var, value, inputs):
        seen.append(("first", where.split(",")[1].strip(), var.name))

    def second(where, var, value, inputs):
        seen.append(("second", where.split(",")[1].strip(), var.name))

    options = PlanOptions(checks=(first, second))
    exe, scope = Executor(check_types=False, options=options), Scope()  # exactly the checks given
    exe.run(startup, scope=scope)
    seen.clear()
    exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    plan = exe.plan_for(main, list(feed), [loss.name])
    assert plan.options is options
    outputs = [(f"op #{s.index} ({main.global_block().ops[s.index].type})", n) for s in plan.steps for n in s.outs]
    assert seen == [(which, *o) for o in outputs for which in ("first", "second")]
    assert {"w1", "w2"} <= {n for _, _, n in seen}  # the updates' outputs were checked too


def test_executor_check_flags_may_change_between_runs():
    main = Program()
    with program_guard(main, Program()):
        y = layers.log(layers.data("x", [2], "float64"))
    exe, feed = Executor(), {"x": np.array([1.0, -1.0])}
    with np.errstate(invalid="ignore"):
        exe.run(main, feed=feed, fetch_list=[y], scope=Scope())
        exe.check_nan_inf = True
        with pytest.raises(NanInfError, match=r"op #0 \(log\)"):
            exe.run(main, feed=feed, fetch_list=[y], scope=Scope())
        exe.check_nan_inf = False
        exe.run(main, feed=feed, fetch_list=[y], scope=Scope())
    assert exe.plans_built == 2  # one plan per setting, each reused


def _cond_program():
    """``exp(x) if p else 2 x``: block 1 is the true branch, whose op #0 is the exp."""
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2], "float64")
        p = layers.data("p", [], "bool")
        out = layers.cond(p, lambda: layers.exp(x), lambda: layers.scale(x, 2.0))
    return main, out


def test_a_swapped_kernel_table_is_used_for_sub_blocks_too():
    main, out = _cond_program()
    feed = {"x": np.ones(2), "p": np.array(True)}
    broken = PlanOptions(kernels={**KERNELS, "exp": lambda op: lambda v: v[:1]})
    (good,) = Executor().run(main, feed=feed, fetch_list=[out], scope=Scope())
    np.testing.assert_array_equal(good, np.exp(np.ones(2)))
    with pytest.raises(ExecutionError, match=r"op #\d+ \(cond\).*block 1, op #0 \(exp\).*returned float64\[1\]"):
        Executor(check_types=True, options=broken).run(main, feed=feed, fetch_list=[out], scope=Scope())


def test_a_sub_block_that_cannot_compile_fails_at_planning_naming_both_ops():
    main, out = _cond_program()
    options = PlanOptions(kernels={t: f for t, f in KERNELS.items() if t != "exp"})
    with pytest.raises(ExecutionError, match=r"block 0, op #\d+ \(cond\).*cannot build its kernel: its true block: "
                                             r"ExecutionError: block 1, op #0 \(exp\).*no kernel"):
        build_plan(main.global_block(), ["x", "p"], [out.name], options)
