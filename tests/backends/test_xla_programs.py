"""Programs with control flow (``cond``, ``while``, ``call``, ``custom_gradient``) run on the xla backend beside
numpy: values, first- and second-order gradients, loops of zero iterations and loops longer than the first
History rows, the same run-time errors, and History readers the backend refuses."""
from __future__ import annotations

import re

import numpy as np
import pytest

from gradgen.framework import ExecutionError, Executor, Scope, gradients
from gradgen.program import Program, layers, program_guard
from tests.backends.xla_harness import assert_same, need_jax, run_both
from tests.control_flow import rnn


@pytest.fixture(autouse=True)
def _jax():
    need_jax()


def _same(main, feed, fetch, what="", params=None):
    """Run on both backends, assert they agree, and return numpy's values (or its error)."""
    names = [v if isinstance(v, str) else v.name for v in fetch]
    want, got = run_both(main, feed, names, params)
    assert_same(want, got, names, what)
    return want


def _startup_values(startup, **params) -> dict:
    """The values ``startup`` puts in a scope (a learning rate), with ``params`` over them."""
    scope = Scope()
    Executor(backend="numpy").run(startup, scope=scope)
    return {**scope.snapshot(), **params}


def _counted_loop(steps, body, loop_vars, **kw):
    """``body`` applied ``steps`` times (``steps`` an int or an int64 var) to ``loop_vars``; their final values."""
    limit = steps if not isinstance(steps, int) else layers.fill_constant([], "int64", steps)
    one = layers.fill_constant([], "int64", 1)
    out = layers.while_loop(lambda t, *vs: layers.less_than(t, limit),
                            lambda t, *vs: [layers.add(t, one)] + list(body(*vs)),
                            [layers.fill_constant([], "int64", 0)] + list(loop_vars), **kw)
    return out[1:]


def _second_order(build, feed_shapes: dict, seed: int = 0):
    """A program: y = build(*inputs), loss = sum(y * c), its gradients g_k, and d/dx sum_k g_k * v_k (second
    order in every input pair). Returns (main, feed, fetch)."""
    rng = np.random.default_rng(seed)
    main = Program()
    with program_guard(main, Program()):
        xs = [layers.data(n, list(s), "float64") for n, s in feed_shapes.items()]
        y = build(*xs)
        c = layers.data("c", [-1] * len(y.shape), "float64")
        loss = layers.reduce_sum(layers.multiply(y, c))
        grads = gradients(loss, xs)
        vs = [layers.data(f"v{k}", list(s), "float64") for k, s in enumerate(feed_shapes.values())]
        directional = layers.reduce_sum(layers.sum([layers.reduce_sum(layers.multiply(g, v))
                                                    for g, v in zip(grads, vs)]))
        seconds = gradients(directional, xs)
    feed = {n: 0.5 * rng.standard_normal(s) for n, s in feed_shapes.items()}
    feed.update({f"v{k}": rng.standard_normal(s) for k, s in enumerate(feed_shapes.values())})
    return main, feed, [y, loss, *grads, *seconds], rng


# -- cond ------------------------------------------------------------------------------------------------------
def _two_branch(x, w, p):
    return layers.cond(p, lambda: layers.multiply(layers.tanh(layers.matmul(x, w)), x),
                       lambda: layers.add(layers.sin(x), layers.scale(layers.matmul(x, w), 3.0)))


@pytest.mark.parametrize("taken", [True, False])
def test_cond_values_and_first_and_second_order_gradients(taken):
    main, feed, fetch, rng = _second_order(
        lambda x, w: _two_branch(x, w, layers.data("p", [], "bool")), {"x": (2, 3), "w": (3, 3)})
    feed.update(p=np.array(taken), c=rng.standard_normal((2, 3)))
    _same(main, feed, fetch, f"cond taken={taken}")


def test_cond_with_several_results_an_outer_var_returned_unchanged_and_a_computed_predicate():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 3], "float64")
        p = layers.less_than(layers.reduce_sum(x), layers.fill_constant([], "float64", 0.0))
        a, b = layers.cond(p, lambda: (x, layers.exp(x)), lambda: (layers.square(x), x))
    for sign in (1.0, -1.0):
        _same(main, {"x": sign * np.abs(np.arange(6.0).reshape(2, 3)) + sign}, [a, b], f"sign {sign}")


def test_a_check_inside_a_branch_fails_the_run_only_when_the_branch_is_taken():
    main = Program()
    with program_guard(main, Program()):
        xs = layers.data("xs", [-1, 2], "float64")
        i = layers.data("i", [], "int64")
        p = layers.data("p", [], "bool")
        out = layers.cond(p, lambda: layers.gather(xs, i), lambda: layers.reduce_sum(xs, [0]))
    xs = np.arange(6.0).reshape(3, 2)
    _same(main, {"xs": xs, "i": np.int64(7), "p": np.array(False)}, [out], "not taken")
    want, got = run_both(main, {"xs": xs, "i": np.int64(7), "p": np.array(True)}, [out.name])
    assert isinstance(want, ExecutionError) and isinstance(got, ExecutionError)
    assert "op #0 (gather)" in str(got), got


def test_branches_making_different_shapes_at_run_time_are_refused_with_the_reason():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1], "float64")
        p = layers.data("p", [], "bool")
        out = layers.cond(p, lambda: layers.scale(x, 2.0), lambda: layers.reduce_sum(x, [0], keep_dim=True))
    want, got = run_both(main, {"x": np.ones(2), "p": np.array(True)}, [out.name])
    assert isinstance(want, list) and want[0].shape == (2,)
    assert isinstance(got, ExecutionError) and "one dtype and shape" in str(got), got


# -- while -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("steps", [0, 1, 7, 70])
def test_rnn_loop_and_its_gradients(steps):
    """70 steps: past the 64 History rows a loop without max_iterations starts with (the step runs again)."""
    main, loss, grads = rnn.build()
    feed = {k: v for k, v in rnn.feed_for(steps).items() if k != "T"}
    feed["T"] = np.int64(steps)
    feed["xs"] = feed["xs"] if steps else np.zeros((0, rnn.B, rnn.H))
    loop = next(op for op in main.global_block().ops if op.type == "while")
    fetch = [loss, *grads, *loop.output("Out"), *loop.output("History"), *loop.output("Steps")]
    _same(main, feed, fetch, f"{steps} steps")


def test_a_long_loop_regrows_its_history_once_and_keeps_the_larger_executable():
    main, loss, grads = rnn.build()
    scope_feed = rnn.feed_for(100)
    exe = Executor(backend="xla")
    first = exe.run(main, feed=scope_feed, fetch_list=[loss, *grads], scope=Scope())
    again = exe.run(main, feed=scope_feed, fetch_list=[loss, *grads], scope=Scope())
    want = Executor().run(main, feed=scope_feed, fetch_list=[loss, *grads], scope=Scope())
    for a, b, w in zip(first, again, want):
        np.testing.assert_array_equal(a, b)
        assert_same([w], [a], ["value"], "100 steps")


@pytest.mark.parametrize("n", [0, 4, 5, 6])
def test_max_iterations_bounds_the_loop_as_numpy_does(n):
    main = Program()
    with program_guard(main, Program()):
        limit = layers.data("n", [], "int64")
        x = layers.data("x", [2], "float64")
        t, h = layers.while_loop(lambda t, h: layers.less_than(t, limit),
                                 lambda t, h: [layers.add(t, layers.fill_constant([], "int64", 1)), layers.sin(h)],
                                 [layers.fill_constant([], "int64", 0), x], max_iterations=5)
    want = _same(main, {"n": np.int64(n), "x": np.array([0.5, -1.0])}, [t, h], f"n={n}")
    if n > 5:
        assert isinstance(want, ExecutionError)
        _, got = run_both(main, {"n": np.int64(n), "x": np.array([0.5, -1.0])}, [t.name, h.name])
        assert "op #1 (while)" in str(got) and "max_iterations=5" in str(got), got
        assert "op #1 (while)" in str(want) and "max_iterations=5" in str(want), want


def _loop_of(body, limit):
    """A program: ``n`` (fed) iterations of ``h = body(h)`` from ``x`` (fed), at most ``limit``."""
    main = Program()
    with program_guard(main, Program()):
        n = layers.data("n", [], "int64")
        x = layers.data("x", [-1], "float64")
        one = layers.fill_constant([], "int64", 1)
        _, h = layers.while_loop(lambda t, h: layers.less_than(t, n), lambda t, h: [layers.add(t, one), body(h)],
                                 [layers.fill_constant([], "int64", 0), x], max_iterations=limit)
    return main, h


def test_a_loop_bounded_by_zero_iterations():
    main, h = _loop_of(layers.sin, 0)
    _same(main, {"x": np.array([0.5, 2.0]), "n": np.int64(0)}, [h], "no iterations")
    want, got = run_both(main, {"x": np.array([0.5, 2.0]), "n": np.int64(1)}, [h.name])
    assert isinstance(want, ExecutionError) and isinstance(got, ExecutionError), (want, got)
    assert "max_iterations=0" in str(got), got


def test_a_loop_var_changing_shape_is_refused_even_when_the_loop_would_not_run():
    """numpy fails in the first iteration that changes it; xla's shapes are static, so it refuses the loop."""
    main, h = _loop_of(lambda h: layers.reduce_sum(h, [0], keep_dim=True), None)
    for n in (0, 1):
        want, got = run_both(main, {"x": np.array([0.5, 2.0]), "n": np.int64(n)}, [h.name])
        assert isinstance(want, ExecutionError) == (n == 1), want
        assert isinstance(got, ExecutionError) and "loop var 1 changes from float64[2] to float64[1]" in str(got)


def test_hessian_vector_product_through_a_loop():
    main, feed, fetch, rng = _second_order(
        lambda h, w: _counted_loop(3, lambda h: [layers.tanh(layers.matmul(h, w))], [h])[0],
        {"h": (2, 3), "w": (3, 3)}, seed=1)
    feed["c"] = rng.standard_normal((2, 3))
    assert sum(op.type == "while" for b in main.blocks for op in b.ops) >= 4
    _same(main, feed, fetch, "second order")


@pytest.mark.parametrize("taken", [True, False])
def test_a_cond_in_a_loop_body_and_a_loop_in_a_cond_branch(taken):
    def build(h, w):
        p = layers.data("p", [], "bool")
        two = layers.fill_constant([], "int64", 2)

        def step(h):
            return [layers.cond(layers.less_than(layers.reduce_sum(h), layers.fill_constant([], "float64", 0.0)),
                                lambda: layers.tanh(layers.matmul(h, w)), lambda: layers.multiply(layers.sin(h), h))]

        looped = layers.cond(p, lambda: _counted_loop(4, step, [h])[0], lambda: layers.multiply(h, w))
        return layers.add(looped, _counted_loop(two, step, [h])[0])

    main, feed, fetch, rng = _second_order(build, {"h": (3, 3), "w": (3, 3)}, seed=2)
    feed.update(p=np.array(taken), c=rng.standard_normal((3, 3)))
    _same(main, feed, fetch, f"nested taken={taken}")


def test_a_loop_inside_a_loop_body():
    main, feed, fetch, rng = _second_order(
        lambda h, w: _counted_loop(2, lambda h: _counted_loop(3, lambda g: [layers.tanh(layers.matmul(g, w))], [h]),
                                   [h])[0],
        {"h": (2, 3), "w": (3, 3)}, seed=3)
    feed["c"] = rng.standard_normal((2, 3))
    _same(main, feed, fetch, "nested loops")


def test_the_gradient_loop_reads_the_forward_body_back_instead_of_recomputing_it():
    """The rnn's gradient loop re-runs the forward body's matmul on numpy; on xla it reads the forward loop's
    stash: of the program's four matmuls (forward body, a recompute, two backward) three are computed."""
    from gradgen.framework.backend.xla.show import lowered_text

    main, loss, grads = rnn.build()
    assert sum(op.type == "matmul" for b in main.blocks for op in b.ops) == 4
    text = lowered_text(main, ["xs", "h0", "w", "c", "T"], [loss.name] + [g.name for g in grads], batch=4)
    assert text.count("stablehlo.dot_general") == 3
    # Only the forward body's gather of xs checks its index: the gradient loop reads History at rows below the
    # forward loop's Steps (its counter starts there), and its own gather of xs is read back.
    body = main.global_block().ops[[op.type for op in main.global_block().ops].index("while")].attr("body_block")
    assert set(re.findall(r"b(\d+)/op(\d+):gather/lt", text)) == {(str(body), "2")}


def _rows_rnn(first: int, step: int, one_outside: bool):
    """h = tanh(h @ w + xs[i] @ u) for i = first, first + step, ... while -T <= i < T (negative i reads from the
    end), with its gradients in w, u, h0 and xs (u's reads the gathered rows back)."""
    main = Program()
    with program_guard(main, Program()):
        xs = layers.data("xs", [-1, 2, 4], "float64")
        h0, w = layers.data("h0", [2, 3], "float64"), layers.data("w", [3, 3], "float64")
        u = layers.data("u", [4, 3], "float64")
        steps = layers.data("T", [], "int64")
        outside = layers.fill_constant([], "int64", step)

        def body(i, h):
            by = outside if one_outside else layers.fill_constant([], "int64", step)
            return [layers.add(i, by),
                    layers.tanh(layers.add(layers.matmul(h, w), layers.matmul(layers.gather(xs, i), u)))]

        def going(i, h):
            return layers.logical_and(layers.less_than(i, steps),
                                      layers.greater_equal(i, layers.scale(steps, scale=-1.0)))

        _, h = layers.while_loop(going, body, [layers.fill_constant([], "int64", first), h0])
        loss = layers.reduce_sum(layers.square(h))
        grads = gradients([loss], [w, u, h0, xs])
    return main, [loss] + grads


@pytest.mark.parametrize("first, step, one_outside", [(0, 1, True), (2, 1, False), (-1, -1, True), (1, 2, False)])
def test_the_gradient_loop_reads_rows_the_forward_loop_kept_already(first, step, one_outside):
    """The forward loop keeps no stash row for a value it carries to the next iteration (History's next row) nor
    for a gather of an outer array at a loop var (gathered again, at ``start + t`` for a var that counts up by
    one, else at its History row): first and second gradients as numpy's, negative indexes and a counter that
    starts past 0 included."""
    main, fetch = _rows_rnn(first, step, one_outside)
    rng = np.random.default_rng(first + 7)
    feed = {"xs": rng.standard_normal((5, 2, 4)), "h0": rng.standard_normal((2, 3)),
            "w": 0.5 * rng.standard_normal((3, 3)), "u": 0.5 * rng.standard_normal((4, 3)), "T": np.int64(5)}
    _same(main, feed, fetch, f"rows from {first} by {step}")


def test_the_rnn_forward_loop_stashes_nothing_the_gradient_loop_reads():
    """Of the rnn's forward loop values read back (the gathered row, the product, the sum, the tanh), the tanh is
    the next h (History's next row) and the row is gathered again: what is left to stash, the gradient loop does
    not read (XLA drops it), so the forward body writes History's rows alone."""
    from gradgen.framework.backend.xla import loop_stash
    from gradgen.framework.backend.shared.loop_read_back import replays_of

    main, _, _ = rnn.build()
    forward = next(op for op in main.global_block().ops if op.type == "while")
    (_, plan), = replays_of(forward)
    carried, regathered = loop_stash.rows_already_kept(forward, main.block(forward.attr("body_block")), plan.names)
    assert set(carried) == {"tanh_0"} and set(regathered) == {"gather_0"}
    assert set(plan.needed) <= set(carried) | set(regathered), plan.needed
    assert loop_stash.counts_up(forward, main.block(forward.attr("body_block")), regathered["gather_0"][2])


def test_a_gradient_loop_after_an_update_reads_the_weights_the_loop_saw():
    """SGD writes w between the forward loop and a second gradient loop, which reads w's snapshot: nothing of
    the updated w may be read back from (or mixed into) the forward loop's stash."""
    rng = np.random.default_rng(9)
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 3], "float64")
        n = layers.data("n", [], "int64")
        w = layers.create_parameter([3, 3], "float64", name="w")
        (h,) = _counted_loop(n, lambda h: [layers.sin(layers.matmul(h, w))], [x], max_iterations=8)
        loss = layers.reduce_mean(layers.square(h))
        from gradgen.framework import optimizer

        optimizer.SGD(0.5).minimize(loss)
        (again,) = gradients(loss, [w])
    assert {"w@SNAPSHOT"} <= set(main.global_block().vars)
    _same(main, {"x": rng.standard_normal((4, 3)), "n": np.int64(5)}, [loss, again, "w"], "after the update",
          params=_startup_values(startup, w=0.5 * rng.standard_normal((3, 3))))


def test_a_block_with_a_loop_is_traced_once_and_donates_nothing(monkeypatch):
    """A loop always states its overflow, so its block has run-time checks: lowered once without donation, not
    lowered with donation, found to check, and lowered again (``control_flow.ALWAYS_STATED``); the run still
    equals numpy's and writes its update."""
    from gradgen.framework import optimizer
    from gradgen.framework.backend.xla import compile as compile_module

    rng = np.random.default_rng(4)
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 3], "float64")
        w = layers.create_parameter([3, 3], "float64", name="w")
        (h,) = _counted_loop(3, lambda h: [layers.tanh(layers.matmul(h, w))], [x])
        loss = layers.reduce_mean(layers.square(h))
        optimizer.SGD(0.5).minimize(loss)
    traces = []
    step = compile_module.CompiledBlock._step
    monkeypatch.setattr(compile_module.CompiledBlock, "_step", lambda self, *a: traces.append(1) or step(self, *a))
    feed, w0 = {"x": rng.standard_normal((4, 3))}, 0.5 * rng.standard_normal((3, 3))
    params = _startup_values(startup, w=w0)
    exe, scope = Executor(backend="xla"), Scope()
    scope.update({name: value.copy() for name, value in params.items()})
    got = exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    (entry,) = exe._runner._compiled.entries(main).values()
    (executable,) = entry.compiled._executables.values()
    assert len(traces) == 1 and not executable.donates
    want = _same(main, feed, [loss, "w"], "one trace", params=params)
    assert not np.allclose(want[1], w0)
    assert_same(want, [got[0], np.asarray(scope["w"])], ["loss", "w"], "the traced-once run")


def test_a_check_inside_a_loop_body_fails_the_run_naming_its_op():
    main, loss, grads = rnn.build()
    feed = rnn.feed_for(5)
    feed["T"] = np.int64(6)  # the body gathers row 5 of 5
    want, got = run_both(main, feed, [loss.name])
    assert isinstance(want, ExecutionError) and isinstance(got, ExecutionError), (want, got)
    assert "block 2, op #" in str(got) and "(gather)" in str(got), got


@pytest.mark.parametrize("rows, limit, steps", [(66, None, 70), (70, None, 70), (3, 3, 5), (2, 3, 5), (5, 3, 5)])
def test_a_loop_stops_before_the_iteration_whose_gather_fails(rows, limit, steps):
    """The rnn's first check is its gather of xs at the counter: xla tests that index before each iteration and
    fails the run there with the gather's error, as numpy's iteration raises it. Past the first 64 History rows
    (the step runs again with more), and at max_iterations, where numpy's limit comes first (3 of 3 rows, 3
    iterations allowed: the limit's error; 2 rows: the gather's)."""
    main = Program()
    with program_guard(main, Program()):
        xs, w = layers.data("xs", [-1, 2], "float64"), layers.data("w", [2, 2], "float64")
        count = layers.data("T", [], "int64")
        one = layers.fill_constant([], "int64", 1)
        _, h = layers.while_loop(
            lambda t, h: layers.less_than(t, count),
            lambda t, h: [layers.add(t, one), layers.tanh(layers.add(layers.matmul(h, w), layers.gather(xs, t)))],
            [layers.fill_constant([], "int64", 0), layers.fill_constant([2], "float64", 0.5)], max_iterations=limit)
        loss = layers.reduce_sum(layers.square(h))
        grads = gradients([loss], [w, xs])
    rng = np.random.default_rng(rows)
    feed = {"xs": rng.standard_normal((rows, 2)), "w": 0.5 * rng.standard_normal((2, 2)), "T": np.int64(steps)}
    want, got = run_both(main, feed, [loss.name] + [g.name for g in grads])
    assert_same(want, got, [loss.name] + [g.name for g in grads], f"{rows} rows")
    if isinstance(want, ExecutionError):
        gather_failed = limit is None or rows < limit
        assert ("(gather)" in str(want)) == ("(gather)" in str(got)) == gather_failed, (want, got)
        assert ("max_iterations" in str(want)) == ("max_iterations" in str(got)) != gather_failed, (want, got)


def test_the_rnn_forward_loop_checks_its_gather_in_the_loop_test():
    """The gather's bounds check leaves the forward body of the compiled program (XLA keeps only the gather and
    its negative-index reading there); the loop test holds it."""
    from gradgen.framework.backend.xla.compile import CompiledBlock
    from gradgen.framework.backend.shared.signature import run_signature

    main, loss, _ = rnn.build()
    block, feed = main.global_block(), rnn.feed_for(5)
    sig = run_signature(block, list(feed), [loss.name])
    compiled = CompiledBlock(block, sig.feeds, sig.from_scope, sig.fetches, sig.commits)
    text = compiled.executable([feed[n] for n in sig.feeds], []).compiled.as_text()
    body = next(op for op in block.ops if op.type == "while").attr("body_block")
    gather = f"b{body}/op{[o.type for o in main.block(body).ops].index('gather')}:gather"
    assert f"while/while/body/{gather}/dynamic_slice" in text  # one row at a scalar index
    assert f"while/while/body/{gather}/ge" not in text and f"while/while/body/{gather}/and" not in text


def test_a_loop_whose_condition_and_body_draw_draws_what_numpy_draws():
    """A redrawing random op in the condition (drawn once per test, as numpy evaluates it; its draws decide the
    trip count) and in a body gated by a gather: working out how to lower the loop traces both apart, which must
    not draw, and a condition with a side effect stays where numpy evaluates it. Four runs, each the next
    samples of the streams."""
    main = Program()
    with program_guard(main, Program()):
        xs = layers.data("xs", [-1, 3], "float64")
        steps = layers.data("T", [], "int64")
        one = layers.fill_constant([], "int64", 1)

        def going(i, acc):
            noise = layers.uniform_random([], dtype="float64", seed=5, redraw=True, min=0.0, max=2.0)
            return layers.less_than(layers.add(layers.cast(i, "float64"), noise), layers.cast(steps, "float64"))

        def body(i, acc):
            draw = layers.gaussian_random([3], dtype="float64", seed=6, redraw=True)
            return [layers.add(i, one), layers.add(acc, layers.multiply(layers.gather(xs, i), draw))]

        count, total = layers.while_loop(going, body, [layers.fill_constant([], "int64", 0),
                                                       layers.fill_constant([3], "float64", 0.0)])
    feed = {"xs": np.arange(18.0).reshape(6, 3), "T": np.int64(5)}
    runs = {}
    for backend in ("numpy", "xla"):
        exe = Executor(backend=backend)
        runs[backend] = [exe.run(main, feed=feed, fetch_list=[count, total], scope=Scope()) for _ in range(4)]
    for want, got in zip(runs["numpy"], runs["xla"]):
        assert got[0] == want[0], (runs["numpy"], runs["xla"])  # the trip count the condition's draws decide
        np.testing.assert_allclose(got[1], want[1], rtol=1e-13)
    assert len({int(run[0]) for run in runs["numpy"]}) > 1, runs["numpy"]


def _loop_gated_by_a_table(limits_rows: int):
    """h = sin(h) while limits[t] > 0, t counting up: the condition gathers, so it checks its index."""
    main = Program()
    with program_guard(main, Program()):
        limits = layers.data("limits", [limits_rows], "int64")
        x = layers.data("x", [2], "float64")
        one, zero = layers.fill_constant([], "int64", 1), layers.fill_constant([], "int64", 0)
        _, h = layers.while_loop(lambda t, h: layers.greater_than(layers.gather(limits, t), zero),
                                 lambda t, h: [layers.add(t, one), layers.sin(h)], [zero, x])
        loss = layers.reduce_sum(h)
    return main, loss


@pytest.mark.parametrize("limits", [[1, 1, 0], [1, 1, 1]])
def test_a_check_in_the_loop_condition_fails_the_run_naming_its_op(limits):
    """A condition that states a check is carried from the end of each iteration (its failure is the loop's):
    [1, 1, 1] runs it at row 3 of 3."""
    main, loss = _loop_gated_by_a_table(len(limits))
    want, got = run_both(main, {"limits": np.array(limits, np.int64), "x": np.array([0.5, 1.0])}, [loss.name])
    if limits[-1]:
        assert isinstance(want, ExecutionError) and isinstance(got, ExecutionError), (want, got)
        assert "block 1, op #" in str(got) and "(gather)" in str(got), got
    else:
        assert_same(want, got, [loss.name])


def test_a_condition_that_checks_nothing_is_xlas_own_loop_test():
    """The RNN's ``t < T`` is traced in XLA's while condition (one step less per iteration than carrying it from
    the end of the body); a condition with a check stays in the body."""
    from gradgen.framework.backend.xla.show import lowered_text

    main, loss, _ = rnn.build()
    text = lowered_text(main, ["xs", "h0", "w", "c", "T"], [loss.name])
    assert "while/while/cond/b1/op0:less_than" in text and "while/while/body/b1/op0" not in text
    gated, gated_loss = _loop_gated_by_a_table(3)
    text = lowered_text(gated, ["limits", "x"], [gated_loss.name])
    assert "while/while/body/b1/op0:gather" in text and "while/while/cond/b1/op0" not in text


def test_a_reader_that_could_see_the_history_padding_is_refused():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2], "float64")
        loop = _counted_loop(3, lambda h: [layers.sin(h)], [x])
        op = next(op for op in main.global_block().ops if op.type == "while")
        total = layers.reduce_sum(main.global_block().var(op.output("History")[1]))
    want, got = run_both(main, {"x": np.array([0.5, 1.0])}, [loop[0].name, total.name])
    assert isinstance(want, list)
    assert isinstance(got, ExecutionError) and "reads the History of a while loop" in str(got), got


# -- call and custom_gradient ----------------------------------------------------------------------------------
def _lse_forward(x):
    top = layers.reduce_max(x, [-1], keep_dim=True)
    return layers.add(layers.log(layers.reduce_sum(layers.exp(layers.subtract(x, top)), [-1], keep_dim=True)), top)


logsumexp = layers.custom_gradient(
    _lse_forward, lambda ins, outs, douts: layers.multiply(douts[0], layers.exp(layers.subtract(ins[0], outs[0]))),
    name="logsumexp")
"""The gradient rule is run by a ``call`` op: first and second order go through both ops."""


def test_custom_gradient_and_call_first_and_second_order():
    main, feed, fetch, rng = _second_order(
        lambda x, w: logsumexp(layers.multiply(layers.matmul(x, w), x)), {"x": (2, 3), "w": (3, 3)}, seed=4)
    feed["c"] = rng.standard_normal((2, 1))
    types = {op.type for b in main.blocks for op in b.ops}
    assert {"custom_gradient", "call"} <= types
    _same(main, feed, fetch, "custom_gradient")


# -- the built-in examples -------------------------------------------------------------------------------------
def _trained(example, backend: str, steps: int) -> tuple[list, dict]:
    """Every step's loss and the final parameters of ``steps`` training steps on ``backend``."""
    exe, scope = Executor(backend=backend), Scope()
    exe.run(example.startup, scope=scope)
    losses = [exe.run(example.main, feed=example.feed, fetch_list=[example.loss], scope=scope)[0]
              for _ in range(steps)]
    return losses, {p.name: scope[p.name] for p in example.params}


@pytest.mark.parametrize("name", ["mlp", "cnn", "rnn"])
def test_the_examples_train_alike_for_20_steps(name):
    from gradgen.framework.backend.xla import LOWERINGS
    from gradgen.framework.tools.examples import EXAMPLES
    from tests.extras import require

    example = EXAMPLES[name]()
    with program_guard(example.main, example.startup):
        example.make_optimizer().minimize(example.loss)
    missing = sorted({op.type for p in (example.main, example.startup) for b in p.blocks for op in b.ops}
                     - set(LOWERINGS))
    require(f"xla lowerings of {', '.join(missing)}" if missing else None, "other families of issue 22")
    want_losses, want_params = _trained(example, "numpy", 20)
    got_losses, got_params = _trained(example, "xla", 20)
    assert_same(want_losses, got_losses, [f"loss {k}" for k in range(20)], name)
    assert_same(list(want_params.values()), list(got_params.values()), list(want_params), name)
