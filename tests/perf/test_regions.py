"""Regions (stretches of small ops run as one generated function): the same answers as op by op, honest plans."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gradgen.framework import ExecutionError, Executor, Scope, append_backward, optimizer
from gradgen.framework.backend.numpy import jit
from gradgen.framework.backend.numpy.compile_queue import wait_for_compiles
from gradgen.framework.backend.numpy.plan import build_plan
from gradgen.framework.backend.numpy.plan_data import PlanOptions
from gradgen.framework.tools.examples import EXAMPLES
from gradgen.framework.tools.plan_listing import plan_lines
from gradgen.program import Program, layers, program_guard
from gradgen.program.initializer import Normal
from tests.extras import require

REGIONS = PlanOptions(warm_runs=0, background_compile=False)  # compiled at the first run
PLAIN = PlanOptions(regions=False)
TOL = {"float64": 1e-12, "float32": 1e-5}


@pytest.fixture(autouse=True)
def _numba():
    require(None if jit.AVAILABLE else "numba", "pip install gradgen[fast]")


def _mlp(dtype, hidden_ops, width=6, hidden=5, bias_shape=(6,), lr=0.01, opt="sgd"):
    """x @ w + b, then ``hidden_ops``, then a small product to the output, a squared-error loss, an optimizer."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, width], dtype)
        y = layers.data("y", [-1, 3], dtype)
        w = layers.create_parameter([width, hidden], dtype, name="w", initializer=Normal(0.0, 0.3, seed=1))
        b = layers.create_parameter(list(bias_shape)[:-1] + [hidden], dtype, name="b",
                                    initializer=Normal(0.0, 0.3, seed=2))
        v = layers.create_parameter([hidden, 3], dtype, name="v", initializer=Normal(0.0, 0.3, seed=3))
        h = x @ w + b
        for kind, arg in hidden_ops:
            h = {"relu": layers.relu, "tanh": layers.tanh, "square": layers.square, "sigmoid": layers.sigmoid,
                 "scale": lambda t: layers.scale(t, scale=arg, bias=0.5), "add_b": lambda t: t + b,
                 "mul_self": lambda t: t * t}[kind](h)
        reduce = layers.reduce_sum if opt != "momentum" else layers.reduce_mean
        loss = reduce(layers.square(h @ v - y))
        grads = append_backward(loss)
        (optimizer.SGD(lr) if opt == "sgd" else optimizer.Momentum(lr, 0.9)).apply_gradients(grads)
    return main, startup, loss, [g for _, g in grads]


def _train(program, options, feed, steps=3, check_types=False):
    main, startup, loss, grads = program
    exe, scope = Executor(options=options, check_types=check_types), Scope()
    exe.run(startup, scope=scope)
    fetched = [exe.run(main, feed=feed, fetch_list=[loss, *grads], scope=scope) for _ in range(steps)]
    return fetched, {n: scope[n].copy() for n in ("w", "b", "v")}, exe


def _scale(want: np.ndarray) -> float:
    """The size the tolerance scales with: the largest finite magnitude (an overflowed inf must not make atol inf,
    which would pass anything)."""
    finite = np.abs(want[np.isfinite(want)])
    return max(1.0, float(finite.max(initial=0.0)))


def _assert_same(a, b, dtype):
    (fa, pa, _), (fb, pb, _) = a, b
    tol = TOL[dtype]
    for got_step, want_step in zip(fa, fb):
        for got, want in zip(got_step, want_step):
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol * _scale(want))
    for name in pa:
        np.testing.assert_allclose(pa[name], pb[name], rtol=tol, atol=tol * _scale(pb[name]))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.sampled_from(["relu", "tanh", "square", "sigmoid", "scale", "add_b", "mul_self"]),
                              st.floats(-2, 2)), max_size=4),
       batch=st.sampled_from([1, 3, 8]), dtype=st.sampled_from(["float64", "float32"]),
       bias_shape=st.sampled_from([(6,), (1, 6)]), opt=st.sampled_from(["sgd", "momentum"]),
       seed=st.integers(0, 2 ** 16))
def test_regions_and_op_by_op_agree_on_random_programs(ops, batch, dtype, bias_shape, opt, seed):
    program = _mlp(dtype, ops, bias_shape=bias_shape, opt=opt)
    rng = np.random.default_rng(seed)
    feed = {"x": rng.standard_normal((batch, 6)).astype(dtype), "y": rng.standard_normal((batch, 3)).astype(dtype)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fused = _train(program, REGIONS, feed)
    assert not [w for w in caught if "cannot compile" in str(w.message)]
    steps = fused[2].plan_for(program[0], ["x", "y"], [program[2].name, *(g.name for g in program[3])]).steps
    regions = [s for s in steps if getattr(s.fn, "region", False)]
    assert regions and all(s.fn.compiled() for s in regions)  # the comparison is with compiled code
    with np.errstate(all="ignore"):  # a random program may overflow (then both paths give the same inf/NaN)
        plain = _train(program, PLAIN, feed)
    _assert_same(fused, plain, dtype)


def test_the_seed_step_is_a_product_a_region_and_the_in_place_update():
    main, startup, loss, _ = _mlp("float64", [("relu", 0.0)], width=1000, hidden=100)
    plan = build_plan(main.global_block(), ["x", "y"], [loss.name], PlanOptions())
    ops = main.global_block().ops
    types = [[ops[i].type for i in s.ops] for s in plan.steps]
    region = max(types, key=len)
    assert types[0] == ["matmul"] and types[-1] == ["matmul", "sgd"]  # the big products stay on the BLAS
    assert region[0] == "elementwise_add" and "relu_grad" in region and region.count("matmul") >= 3
    inside = {n for s in plan.steps if len(s.ops) > 2 for i in s.ops for n in ops[i].output_arg_names}
    made = {n for s in plan.steps for n in s.outs}
    assert "relu_0" in inside and "relu_0" not in made  # read only inside the region: never stored
    assert any("region" in line for line in plan_lines(main.global_block(), ["x", "y"], [loss.name]))


def test_checking_plans_and_plans_without_fusion_have_no_regions():
    main, _, loss, _ = _mlp("float64", [("relu", 0.0)])
    for options in (PlanOptions(fuse=False), PlanOptions(regions=False)):
        assert all(len(s.ops) <= 2 for s in build_plan(main.global_block(), ["x", "y"], [loss.name], options).steps)
    checked = Executor(check_types=True).plan_for(main, ["x", "y"], [loss.name])
    assert all(len(s.ops) <= 2 for s in checked.steps)


def test_run_time_shapes_the_region_does_not_cover_run_op_by_op():
    """A bias declared [-1, 5] fed as one row broadcasts at run time, and a batch of 3000 makes the small
    products big: the region refuses both, and the ordinary kernels give the answer."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 6], "float64")
        b = layers.data("b", [-1, 5], "float64")
        w = layers.create_parameter([6, 5], "float64", name="w", initializer=Normal(0.0, 0.3, seed=1))
        v = layers.create_parameter([5, 40], "float64", name="v", initializer=Normal(0.0, 0.3, seed=3))
        loss = layers.reduce_sum(layers.square(layers.tanh(x @ w + b) @ v))
        optimizer.SGD(0.01).minimize(loss)
    rng = np.random.default_rng(0)
    for rows, b_rows in ((8, 1), (3000, 3000)):
        feed = {"x": rng.standard_normal((rows, 6)), "b": rng.standard_normal((b_rows, 5))}
        plan_steps = build_plan(main.global_block(), ["x", "b"], [loss.name], REGIONS).steps
        assert any(len(s.ops) > 2 for s in plan_steps)
        scopes = []
        for exe in (Executor(options=REGIONS, check_types=False), Executor(options=PLAIN, check_types=False)):
            scope = Scope()
            exe.run(startup, scope=scope)
            scopes.append((scope, [exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0] for _ in range(2)]))
        np.testing.assert_allclose(scopes[0][1], scopes[1][1], rtol=1e-12)
        np.testing.assert_allclose(scopes[0][0]["v"], scopes[1][0]["v"], rtol=1e-12, atol=1e-14)


def test_the_mean_of_no_elements_is_nan_in_a_region_as_op_by_op():
    """A region's reduce_mean over an empty batch gave 0 (its count was clamped to 1); op by op gives NaN."""
    main, startup, loss, _ = _mlp("float64", [("tanh", 0.0)], opt="momentum")  # a reduce_mean loss
    steps = build_plan(main.global_block(), ["x", "y"], [loss.name], REGIONS).steps
    assert any(getattr(s.fn, "region", False) and "reduce_mean" in [main.global_block().ops[i].type for i in s.ops]
               for s in steps)
    empty = {"x": np.zeros((0, 6)), "y": np.zeros((0, 3))}
    for options in (REGIONS, PLAIN):
        exe, scope = Executor(options=options, check_types=False), Scope()
        exe.run(startup, scope=scope)
        (got,) = exe.run(main, feed=empty, fetch_list=[loss], scope=scope)
        assert np.isnan(got), options


def test_a_failing_op_inside_a_region_is_named_with_its_inputs():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, -1], "float64")
        z = layers.data("z", [3, 2], "float64")
        y = layers.tanh(layers.exp(x) @ z)
    exe = Executor(options=REGIONS, check_types=False)
    (got,) = exe.run(main, feed={"x": np.zeros((2, 3)), "z": np.ones((3, 2))}, fetch_list=[y])
    np.testing.assert_allclose(got, np.tanh(np.full((2, 2), 3.0)))
    with pytest.raises(ExecutionError, match=r"op #1 \(matmul\).*inputs: X=exp_0: float64\[2, 4\], Y=z"):
        exe.run(main, feed={"x": np.zeros((2, 4)), "z": np.ones((3, 2))}, fetch_list=[y])


@pytest.mark.parametrize("rows,compiled", [(8, True), (4000, False)])
def test_a_region_is_compiled_only_where_per_op_overhead_dominates(rows, compiled):
    """After the warm runs, a stretch of ops on small arrays is compiled; on big arrays each op's own work
    dwarfs what a region saves (``fuse_region._WORTH_COMPILING``), so numba is never asked."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 256], "float64")
        y = layers.data("y", [-1, 256], "float64")
        loss = layers.reduce_sum(layers.square(layers.tanh(x) * 2.0 - y))
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((rows, 256)), "y": rng.standard_normal((rows, 256))}
    exe = Executor(options=PlanOptions(warm_runs=2), check_types=False)
    for run in range(4):
        (got,) = exe.run(main, feed=feed, fetch_list=[loss])
        if run == 2:  # the run after the warm ones asked the compile worker, and went op by op
            wait_for_compiles()
    np.testing.assert_allclose(got, np.sum(np.square(np.tanh(feed["x"]) * 2.0 - feed["y"])), rtol=1e-12)
    (step,) = [s for s in exe.plan_for(main, ["x", "y"], [loss.name]).steps if len(s.ops) > 1]
    assert step.fn.compiled() is compiled


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_built_in_examples_train_the_same_with_regions(name):
    """mlp, cnn and rnn (a while loop, whose body's plan has regions too), regions compiled at once."""
    runs = []
    for options in (REGIONS, PLAIN):
        example = EXAMPLES[name]()
        with program_guard(example.main, example.startup):
            example.make_optimizer().minimize(example.loss)
        exe, scope = Executor(options=options, check_types=False), Scope()
        exe.run(example.startup, scope=scope)
        losses = [exe.run(example.main, feed=example.feed, fetch_list=[example.loss], scope=scope)[0]
                  for _ in range(4)]
        runs.append((losses, {n: np.array(scope[n]) for n in scope}))
        steps = exe.plan_for(example.main, list(example.feed), [example.loss.name]).steps
        compiled = [s for s in steps if getattr(s.fn, "region", False) and s.fn.compiled()]
        assert bool(compiled) is (options is REGIONS)
    (got, got_scope), (want, want_scope) = runs
    np.testing.assert_allclose(got, want, rtol=1e-12)
    for n, value in want_scope.items():
        np.testing.assert_allclose(got_scope[n], value, rtol=1e-12, atol=1e-12, err_msg=n)
