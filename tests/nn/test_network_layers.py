"""fc, dropout, embedding, layer_norm and batch_norm: forward against numpy, gradients against finite differences."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, append_backward, gradients
from gradgen.framework.tools.gradcheck import check_gradients
from gradgen.program import Program, layers, program_guard
from gradgen.program.layers.helper import append
from tests.grad.checking import check_op_gradients


def _run_startup(startup):
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    return exe, scope


def _assert_param_grads_match_finite_differences(main, loss, feed, scope, params_grads):
    reports = check_gradients(main, loss.name, {p.name: g.name for p, g in params_grads}, feed, scope)
    assert reports and all(r.ok for r in reports), reports


def test_fc_computes_act_of_x_w_plus_b_and_its_parameter_gradients_are_right():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 5], "float64")
        h = layers.fc(x, 4, act="tanh", name="fc1")
        loss = layers.reduce_sum(layers.square(layers.fc(h, 2, name="fc2")))
        params_grads = append_backward(loss)
    assert [p.name for p, _ in params_grads] == ["fc1.w", "fc1.b", "fc2.w", "fc2.b"]
    exe, scope = _run_startup(startup)
    xs = np.random.default_rng(0).standard_normal((3, 5))
    scope.set("fc1.b", np.random.default_rng(1).standard_normal(4))
    (got,) = exe.run(main, feed={"x": xs}, fetch_list=[h], scope=scope)
    np.testing.assert_allclose(got, np.tanh(xs @ scope["fc1.w"] + scope["fc1.b"]), rtol=1e-12)
    _assert_param_grads_match_finite_differences(main, loss, {"x": xs}, scope, params_grads)


def _dropout_program(p, seed, is_test=False):
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [200, 50], "float64")
        out = layers.dropout(x, p, is_test=is_test, seed=seed)
        (dx,) = gradients(layers.reduce_sum(out * 3.0), [x])
    mask = main.global_block().ops[0].output("Mask")[0]
    return main, out, dx, mask


def test_dropout_scales_kept_elements_reuses_its_mask_in_the_gradient_and_is_seeded():
    main, out, dx, mask = _dropout_program(0.3, seed=7)
    exe = Executor()
    xs = np.random.default_rng(0).standard_normal((200, 50))
    o1, g1, m1 = exe.run(main, feed={"x": xs}, fetch_list=[out, dx, mask], scope=Scope())
    assert set(np.unique(m1)) == {0.0, 1.0 / 0.7}
    assert abs((m1 == 0).mean() - 0.3) < 0.02
    np.testing.assert_array_equal(o1, xs * m1)
    np.testing.assert_array_equal(g1, 3.0 * m1)
    o2, _, _ = exe.run(main, feed={"x": xs}, fetch_list=[out, dx, mask], scope=Scope())
    assert not np.array_equal(o1, o2)  # the stream advances between runs of the compiled plan
    again = _dropout_program(0.3, seed=7)
    fresh = Executor().run(again[0], feed={"x": xs}, fetch_list=[again[1]], scope=Scope())[0]
    np.testing.assert_array_equal(fresh, o1)  # same seed, same first mask


def test_dropout_is_the_identity_in_inference():
    main, out, dx, _ = _dropout_program(0.5, seed=1, is_test=True)
    xs = np.random.default_rng(0).standard_normal((200, 50))
    o, g = Executor().run(main, feed={"x": xs}, fetch_list=[out, dx], scope=Scope())
    np.testing.assert_array_equal(o, xs)
    np.testing.assert_array_equal(g, np.full_like(xs, 3.0))


def test_embedding_looks_up_rows_and_accumulates_gradients_of_repeated_ids():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        ids = layers.data("ids", [2, 3], "int64")
        emb = layers.embedding(ids, (5, 4), dtype="float64", name="emb")
        r = layers.data("r", [2, 3, 4], "float64")
        loss = layers.reduce_sum(emb * r)
        params_grads = append_backward(loss)
    exe, scope = _run_startup(startup)
    idx = np.array([[0, 2, 2], [4, 0, 1]])
    rv = np.random.default_rng(0).standard_normal((2, 3, 4))
    got, grad = exe.run(main, feed={"ids": idx, "r": rv}, fetch_list=[emb, params_grads[0][1]], scope=scope)
    np.testing.assert_array_equal(got, scope["emb.w"][idx])
    want = np.zeros((5, 4))
    np.add.at(want, idx.reshape(-1), rv.reshape(-1, 4))
    np.testing.assert_allclose(grad, want, rtol=1e-12)


@pytest.mark.parametrize("begin", [-1, 1])
def test_layer_norm_first_and_second_order(begin):
    x = np.random.default_rng(0).standard_normal((3, 2, 4))
    check_op_gradients(lambda v: layers.layer_norm(v, begin_norm_axis=begin, scale=False, shift=False), {"x": x})


def test_layer_norm_forward_and_parameter_gradients():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [3, 6], "float64")
        y = layers.layer_norm(x, name="ln")
        loss = layers.reduce_sum(layers.sin(y))
        params_grads = append_backward(loss)
    exe, scope = _run_startup(startup)
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((3, 6))
    scope.set("ln.scale", rng.standard_normal(6))
    scope.set("ln.bias", rng.standard_normal(6))
    (got,) = exe.run(main, feed={"x": xs}, fetch_list=[y], scope=scope)
    norm = (xs - xs.mean(1, keepdims=True)) / np.sqrt(xs.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(got, norm * scope["ln.scale"] + scope["ln.bias"], rtol=1e-10)
    _assert_param_grads_match_finite_differences(main, loss, {"x": xs}, scope, params_grads)


def _raw_batch_norm(is_test):
    def build(x, scale, bias, mean, var):
        y, _, _ = append("batch_norm", {"X": x, "Scale": scale, "Bias": bias, "Mean": mean, "Variance": var},
                         {"is_test": is_test, "epsilon": 1e-3}, out_slots=("Y", "MeanOut", "VarianceOut"))
        return y

    return build


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 2, 2)], ids=str)
@pytest.mark.parametrize("is_test", [False, True])
def test_batch_norm_gradients_first_and_second_order(shape, is_test):
    rng = np.random.default_rng(2)
    c = shape[1]
    check_op_gradients(_raw_batch_norm(is_test), {"x": rng.standard_normal(shape), "scale": rng.uniform(0.5, 2, c),
                                                  "bias": rng.standard_normal(c)},
                       extra_feed={"mean": rng.standard_normal(c), "var": rng.uniform(0.5, 2.0, c)})


def test_batch_norm_layer_updates_running_statistics_and_inference_uses_them():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 3, 2, 2], "float64")
        y = layers.batch_norm(x, momentum=0.8, name="bn")
    exe, scope = _run_startup(startup)
    xs = np.random.default_rng(3).standard_normal((5, 3, 2, 2)) * 2 + 1
    (got,) = exe.run(main, feed={"x": xs}, fetch_list=[y], scope=scope)
    mu, var = xs.mean(axis=(0, 2, 3)), xs.var(axis=(0, 2, 3))
    np.testing.assert_allclose(got, (xs - mu[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5), rtol=1e-10)
    np.testing.assert_allclose(scope["bn.mean"], 0.2 * mu, rtol=1e-12)
    np.testing.assert_allclose(scope["bn.variance"], 0.8 + 0.2 * var, rtol=1e-12)
    test_program = main.clone(for_test=True)
    assert [op.attr("is_test") for op in test_program.global_block().ops if op.type == "batch_norm"] == [True]
    (inferred,) = exe.run(test_program, feed={"x": xs}, fetch_list=[y.name], scope=scope)
    running = (xs - scope["bn.mean"][:, None, None]) / np.sqrt(scope["bn.variance"][:, None, None] + 1e-5)
    np.testing.assert_allclose(inferred, running, rtol=1e-10)


def test_clone_for_test_drops_backward_and_optimizer_ops_and_switches_dropout_off():
    from gradgen.framework import optimizer

    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 4], "float64")
        h = layers.dropout(layers.fc(x, 3, act="relu", name="fc"), 0.5, seed=3)
        loss = layers.mean(h)
        optimizer.SGD(0.1).minimize(loss)
    test_program = main.clone(for_test=True)
    ops = test_program.global_block().ops
    assert {op.role for op in ops} == {"forward"}
    assert [op.type for op in ops] == [op.type for op in main.global_block().ops if op.role == "forward"]
    assert [op.attr("is_test") for op in ops if op.type == "dropout"] == [True]
    assert not any("@GRAD" in name for name in test_program.global_block().vars)
    exe, scope = _run_startup(startup)
    xs = np.random.default_rng(0).standard_normal((5, 4))
    a, = exe.run(test_program, feed={"x": xs}, fetch_list=[h.name], scope=scope)
    b, = exe.run(test_program, feed={"x": xs}, fetch_list=[h.name], scope=scope)
    np.testing.assert_array_equal(a, b)  # inference is deterministic
    np.testing.assert_allclose(a, np.maximum(xs @ scope["fc.w"] + scope["fc.b"], 0), rtol=1e-12)
    assert any(op.role == "backward" for op in main.global_block().ops)  # the original is untouched
