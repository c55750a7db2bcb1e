"""while_loop: forward values, gradients against the unrolled loop and finite differences, errors."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, ExecutionError, Scope, gradients
from gradgen.program import Program, layers, program_guard
from gradgen.program.errors import OpError, ProgramError
from tests.grad.checking import check_op_gradients

from .rnn import B, H, build, feed_for, numeric, run


def _counted_loop(steps: int, body, loop_vars, **kw):
    """``body`` applied ``steps`` times (a fixed trip count, so shapes stay static for the checker)."""
    limit = layers.fill_constant([], "int64", steps)
    one = layers.fill_constant([], "int64", 1)
    out = layers.while_loop(lambda t, *vs: layers.less_than(t, limit),
                            lambda t, *vs: [layers.add(t, one)] + list(body(*vs)),
                            [layers.fill_constant([], "int64", 0)] + list(loop_vars), **kw)
    return out[1:]


@pytest.mark.parametrize("steps", [0, 1, 7])
def test_rnn_loop_equals_the_unrolled_loop_and_finite_differences(steps):
    feed = feed_for(steps)
    loop, loss, (gw, gh0) = build()
    unrolled, u_loss, (u_gw, u_gh0) = build(steps)
    got = run(loop, [loss, gw, gh0], feed)
    want = run(unrolled, [u_loss] + [g for g in (u_gw, u_gh0) if g is not None], feed)
    if u_gw is None:  # zero steps: the loss does not depend on w, so its gradient is zero
        want.insert(1, np.zeros((H, H)))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-10)
    np.testing.assert_allclose(got[1], numeric(loop, loss, feed, "w"), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(got[2], numeric(loop, loss, feed, "h0"), rtol=1e-6, atol=1e-8)


def test_the_loop_records_every_iteration_and_counts_them():
    feed = feed_for(5)
    main, _, _ = build()
    op = next(op for op in main.global_block().ops if op.type == "while" and op.role == "forward")
    exe = Executor()
    for _ in range(2):  # the second run reuses the plans' buffers
        history, steps = exe.run(main, feed=feed,
                                 fetch_list=[op.output("History")[1], op.output("Steps")[0]], scope=Scope())
    assert steps == 5 and history.shape == (5, B, H)
    h = feed["h0"]
    for t in range(5):  # every row keeps its own iteration's value (plan buffers never overwrite a held array)
        np.testing.assert_allclose(history[t], h, rtol=1e-14)
        h = np.tanh(h @ feed["w"] + feed["xs"][t])


@pytest.mark.parametrize("bias_shape", [[3], [1, 3], [2, 3]])
def test_a_body_reading_a_parameter_several_times(bias_shape):
    rng = np.random.default_rng(3)

    def body(h, w, b):
        hw = layers.matmul(h, w)
        return [layers.add(layers.sin(hw), layers.multiply(layers.matmul(hw, w), b))]

    check_op_gradients(lambda h, w, b: _counted_loop(3, lambda h: body(h, w, b), [h])[0],
                       {"h": rng.standard_normal((2, 3)), "w": 0.4 * rng.standard_normal((3, 3)),
                        "b": rng.standard_normal(bias_shape)})


def test_loop_vars_read_and_written_by_each_other_and_an_overwritten_local():
    rng = np.random.default_rng(4)

    def body(a, s):
        mixed = layers.tanh(layers.add(a, s))
        layers.assign(layers.multiply(mixed, s), output=mixed)  # the body overwrites its own var
        return [mixed, layers.add(s, layers.scale(a, 0.5))]

    check_op_gradients(lambda a, s: _counted_loop(4, body, [a, s])[0],
                       {"a": rng.standard_normal((2, 3)), "s": 0.5 * rng.standard_normal((2, 3))})


def test_a_cond_inside_the_loop_body():
    rng = np.random.default_rng(5)

    def build_loop(h, w):
        limit, one = layers.fill_constant([], "int64", 4), layers.fill_constant([], "int64", 1)
        two = layers.fill_constant([], "int64", 2)

        def body(t, h):
            new = layers.cond(layers.less_than(t, two), lambda: layers.tanh(layers.matmul(h, w)),
                              lambda: layers.multiply(layers.sin(h), h))
            return [layers.add(t, one), new]

        return layers.while_loop(lambda t, h: layers.less_than(t, limit), body,
                                 [layers.fill_constant([], "int64", 0), h])[1]

    check_op_gradients(build_loop, {"h": rng.standard_normal((2, 3)), "w": 0.5 * rng.standard_normal((3, 3))})


def test_hessian_vector_product_through_three_steps():
    rng = np.random.default_rng(6)
    main = Program()
    with program_guard(main, Program()):
        h0 = layers.data("h0", [B, H], "float64")
        w = layers.data("w", [H, H], "float64")
        v = layers.data("v", [H, H], "float64")
        (h,) = _counted_loop(3, lambda h: [layers.tanh(layers.matmul(h, w))], [h0])
        loss = layers.reduce_sum(layers.square(h))
        (gw,) = gradients(loss, [w])
        directional = layers.reduce_sum(layers.multiply(gw, v))
        (hvp,) = gradients(directional, [w])
    feed = {"h0": rng.standard_normal((B, H)), "w": 0.5 * rng.standard_normal((H, H)),
            "v": rng.standard_normal((H, H))}
    (got,) = Executor(check_types=True).run(main, feed=feed, fetch_list=[hvp], scope=Scope())
    from gradgen.framework.tools.gradcheck import numeric_gradient

    want = numeric_gradient(main, feed, Scope(), directional.name, "w")
    assert np.abs(want).max() > 1e-3  # the check is not vacuous
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)
    loops = [op for b in main.blocks for op in b.ops if op.type == "while"]
    assert len(loops) >= 4  # forward, its gradient, and the gradients of both in the second pass


def test_exceeding_max_iterations_is_a_run_time_error_naming_the_loop():
    main = Program()
    with program_guard(main, Program()):
        n = layers.data("n", [], "int64")
        one = layers.fill_constant([], "int64", 1)
        (t,) = layers.while_loop(lambda t: layers.less_than(t, n), lambda t: [layers.add(t, one)],
                                 [layers.fill_constant([], "int64", 0)], max_iterations=5)
    exe = Executor()
    assert exe.run(main, feed={"n": np.int64(5)}, fetch_list=[t], scope=Scope())[0] == 5
    with pytest.raises(ExecutionError, match=r"op #2 \(while\).*max_iterations=5"):
        exe.run(main, feed={"n": np.int64(6)}, fetch_list=[t], scope=Scope())


def test_a_body_that_changes_a_loop_var_type_is_a_build_error():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3], "float64")
        with pytest.raises(OpError, match=r"loop var 0 is float64\[2, 3\].*float64\[3, 2\]"):
            layers.while_loop(lambda h: layers.less_than(layers.reduce_sum(h), layers.fill_constant([], "float64", 1)),
                              lambda h: [layers.transpose(h, [1, 0])], [x])


def test_a_body_writing_an_outer_var_is_a_build_error():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        outer = layers.scale(x, 1.0)
        with pytest.raises(ProgramError, match="writes '.*', a var of an enclosing block"):
            layers.while_loop(lambda h: layers.less_than(layers.reduce_sum(h), layers.fill_constant([], "float64", 1)),
                              lambda h: [layers.assign(h, output=outer)], [x])


def test_a_loop_var_that_changes_shape_at_run_time_is_an_error():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1], "float64")
        one = layers.fill_constant([], "int64", 1)
        _, out = layers.while_loop(lambda t, h: layers.less_than(t, one),
                                   lambda t, h: [layers.add(t, one), layers.concat([h, h])],
                                   [layers.fill_constant([], "int64", 0), x])
    with pytest.raises(ExecutionError, match=r"loop var 1 changed shape from \[2\] to \[4\]"):
        Executor().run(main, feed={"x": np.ones(2)}, fetch_list=[out], scope=Scope())


def test_a_loop_inside_a_loop_body():
    rng = np.random.default_rng(7)

    def nested(h, w):
        inner = lambda h: _counted_loop(3, lambda g: [layers.tanh(layers.matmul(g, w))], [h])  # noqa: E731
        return _counted_loop(2, inner, [h])[0]

    check_op_gradients(nested, {"h": rng.standard_normal((2, 3)), "w": 0.5 * rng.standard_normal((3, 3))})


@pytest.mark.parametrize("taken", [True, False])
def test_a_loop_inside_a_cond_branch(taken):
    rng = np.random.default_rng(8)

    def build(h, w, p):
        return layers.cond(p, lambda: _counted_loop(3, lambda g: [layers.sin(layers.matmul(g, w))], [h])[0],
                           lambda: layers.multiply(h, h))

    check_op_gradients(build, {"h": rng.standard_normal((2, 3)), "w": 0.5 * rng.standard_normal((3, 3))},
                       extra_feed={"p": np.array(taken)})


def test_a_loop_gradient_taken_after_the_update_sees_the_weights_the_loop_saw():
    """gradients() appended after an SGD step: the gradient loop reads w's snapshot, not the updated w."""
    rng = np.random.default_rng(9)

    def build(with_update: bool):
        main, startup = Program(), Program()
        with program_guard(main, startup):
            h0 = layers.data("h0", [2, 3], "float64")
            w = layers.create_parameter([3, 3], "float64", name="w")
            (h,) = _counted_loop(3, lambda h: [layers.tanh(layers.matmul(h, w))], [h0])
            loss = layers.reduce_sum(layers.square(h))
            if with_update:
                from gradgen.framework import optimizer

                optimizer.SGD(0.5).minimize(loss)
            (gw,) = gradients(loss, [w])
        return main, startup, gw

    feed = {"h0": rng.standard_normal((2, 3))}
    w0 = 0.5 * rng.standard_normal((3, 3))
    results = []
    for with_update in (False, True):
        main, startup, gw = build(with_update)
        scope = Scope()
        Executor().run(startup, scope=scope)
        scope.set("w", w0.copy())
        results.append(Executor().run(main, feed=feed, fetch_list=[gw], scope=scope)[0])
        assert with_update == (not np.array_equal(scope["w"], w0))  # the update did happen
    np.testing.assert_array_equal(results[1], results[0])


@pytest.mark.filterwarnings("ignore:invalid value encountered in log")
def test_check_nan_inf_reaches_inside_the_loop_body():
    from gradgen.framework import NanInfError

    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        (h,) = _counted_loop(3, lambda h: [layers.log(layers.scale(h, 1.0, -1.0))], [x])  # log(h - 1)
    feed = {"x": np.array([5.0, 4.0, 3.0])}  # the second iteration takes the log of a negative number
    (out,) = Executor().run(main, feed=feed, fetch_list=[h], scope=Scope())
    assert np.isnan(out).any()  # unchecked, the NaN just flows out
    with pytest.raises(NanInfError, match=r"block 2, op #\d+ \(log\).*produced NaN.*inside block 0, op #\d+ \(while\)"):
        Executor(check_nan_inf=True).run(main, feed=feed, fetch_list=[h], scope=Scope())


def test_the_requested_gradient_of_a_var_the_loop_reads_is_named_var_at_grad(tmp_path, capsys):
    """The reverse body's per-iteration gradient of ``w`` must not take ``w@GRAD``: the caller's gradient has it."""
    from gradgen.framework import append_backward
    from gradgen.framework.tools.cli import main as cli

    _, loss, (gw, gh0) = build()
    assert (gw.name, gh0.name) == ("w@GRAD", "h0@GRAD")
    program = Program()
    with program_guard(program, Program()):
        x = layers.data("x", [B, H], "float64")
        w = layers.create_parameter([H, H], "float64", name="w")
        (h,) = _counted_loop(3, lambda h: [layers.tanh(layers.matmul(h, w))], [x])
        total = layers.reduce_sum(h)
        assert [(p.name, g.name) for p, g in append_backward(total)] == [("w", "w@GRAD")]
    program.save(tmp_path / "p.json")
    rng = np.random.default_rng(0)
    xv, wv = rng.standard_normal((B, H)), 0.5 * rng.standard_normal((H, H))
    np.save(tmp_path / "x.npy", xv)
    np.savez(tmp_path / "w.npz", w=wv)
    assert cli(["run", str(tmp_path / "p.json"), "--feed", f"x={tmp_path / 'x.npy'}", "--params",
                str(tmp_path / "w.npz"), "--fetch", "w@GRAD", "--save", str(tmp_path / "got")]) == 0
    assert "w@GRAD: float64[3, 3]" in capsys.readouterr().out

    def unrolled(w):
        h = xv
        for _ in range(3):
            h = np.tanh(h @ w)
        return h.sum()

    eps, want = 1e-6, np.zeros((H, H))
    for i in range(H):
        for j in range(H):
            d = np.zeros((H, H))
            d[i, j] = eps
            want[i, j] = (unrolled(wv + d) - unrolled(wv - d)) / (2 * eps)
    np.testing.assert_allclose(np.load(tmp_path / "got" / "w@GRAD.npy"), want, rtol=1e-6, atol=1e-8)


def test_a_history_nothing_reads_is_not_stacked_and_the_results_stay_the_same():
    """The plan tells ``while``'s factory which outputs die unread (``dropped``): the gradient loop's own History,
    never the forward History its gradient reads, nor one that is fetched; a checking plan is told nothing."""
    from gradgen.framework.backend.numpy.kernels import KERNELS
    from gradgen.framework.backend.numpy.plan_data import PlanOptions

    feed = feed_for(5)
    main, loss, (gw, gh0) = build()
    told: list[tuple[str, frozenset]] = []
    made: list = []

    def spy(op, blocks, *, dropped=frozenset()):
        told.append((op.role, dropped))
        kernel = KERNELS["while"](op, blocks, dropped=dropped)

        def run(*values):
            made.append(kernel(*values))
            return made[-1]
        return run

    names = {v.name for v in main.global_block().vars.values()}
    feed = {k: v for k, v in feed.items() if k in names}
    got = Executor(check_types=False, options=PlanOptions(kernels={**KERNELS, "while": spy})).run(
        main, feed=feed, fetch_list=[loss, gw, gh0], scope=Scope())
    want = run(main, [loss, gw, gh0], feed)  # check_types: every History stacked
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    ops = {op.role: op for op in main.global_block().ops if op.type == "while"}
    assert not set(ops["forward"].output("History")) & dict(told)["forward"]  # its gradient reads it
    assert set(ops["backward"].output("History")) <= dict(told)["backward"]
    backward = made[[role for role, _ in told].index("backward")]
    n = len(ops["backward"].input("X"))
    assert all(h is None for h in backward[n:2 * n]) and backward[-1] == 5  # Steps is still counted
    fetched = Executor(check_types=False).run(main, feed=feed, fetch_list=[ops["backward"].output("History")[1]],
                                              scope=Scope())[0]
    assert fetched.shape[0] == 5  # fetched: stacked as ever


def test_the_while_kernel_stacks_only_the_histories_it_is_not_told_are_dropped():
    from gradgen.framework.backend.numpy.kernels import KERNELS
    main = Program()
    with program_guard(main, Program()):
        limit = layers.fill_constant([], "int64", 3)
        one = layers.fill_constant([], "int64", 1)
        x = layers.data("x", [2], "float32")
        layers.while_loop(lambda t, h: layers.less_than(t, limit),
                          lambda t, h: [layers.add(t, one), layers.scale(h, 2.0)],
                          [layers.fill_constant([], "int64", 0), x])
    op = next(op for op in main.global_block().ops if op.type == "while")
    blocks = {"cond": lambda env: [env[op.attr("cond_params")[0]] < 3],
              "body": lambda env: [env[op.attr("body_params")[0]] + 1, env[op.attr("body_params")[1]] * 2]}
    x0 = np.array([1.0, -1.0], np.float32)
    full = KERNELS["while"](op, blocks)(np.int64(0), x0, np.int64(3), np.int64(1))
    part = KERNELS["while"](op, blocks, dropped=frozenset(op.output("History")[1:]))(
        np.int64(0), x0, np.int64(3), np.int64(1))
    assert full[3].dtype == np.float32 and full[3].shape == (3, 2) and part[3] is None
    np.testing.assert_array_equal(part[2], full[2])  # the counter's History is still recorded
    for a, b in zip(full[:2] + full[4:], part[:2] + part[4:]):
        np.testing.assert_array_equal(a, b)
