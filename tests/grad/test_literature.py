"""The cases people get wrong, from the backprop literature, each checked by numbers."""
import numpy as np
import pytest

from gradgen.framework import Executor, Scope, append_backward, gradients
from gradgen.framework.tools.gradcheck import numeric_gradient
from gradgen.program import Program, layers, program_guard

from .checking import check_op_gradients


def test_a_var_used_by_two_ops_accumulates_both_contributions():
    # y = x * a; z = w * x + b; loss from both
    rng = np.random.default_rng(0)
    x, a, w, b = (rng.standard_normal((3, 4)) for _ in range(4))
    main = Program()
    with program_guard(main, Program()):
        xv, av, wv, bv = (layers.data(n, [3, 4], "float64") for n in "xawb")
        y = xv * av
        z = wv * xv + bv
        loss = layers.reduce_sum(y) + layers.reduce_sum(layers.square(z))
        (gx,) = gradients(loss, [xv])
    ops = [op.type for op in main.global_block().ops if op.role == "backward"]
    assert ops.count("sum") == 1, ops
    (got,) = Executor().run(main, feed={"x": x, "a": a, "w": w, "b": b}, fetch_list=[gx], scope=Scope())
    np.testing.assert_allclose(got, a + 2 * (w * x + b) * w, rtol=1e-12)


@pytest.mark.parametrize("perm", [[1, 0, 2], [2, 0, 1], [0, 2, 1], [2, 1, 0]])
def test_transpose_returns_the_gradient_through_the_inverse_permutation(perm):
    rng = np.random.default_rng(1)
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3, 4], "float64")
        r = layers.data("r", [[2, 3, 4][p] for p in perm], "float64")
        loss = layers.reduce_sum(layers.transpose(x, perm) * r)
        (gx,) = gradients(loss, [x])
    grad_ops = [op for op in main.global_block().ops if op.role == "backward" and op.type == "transpose"]
    assert [op.attr("perm") for op in grad_ops] == [list(np.argsort(perm))]
    rv = rng.standard_normal([[2, 3, 4][p] for p in perm])
    (got,) = Executor().run(main, feed={"x": rng.standard_normal((2, 3, 4)), "r": rv}, fetch_list=[gx], scope=Scope())
    np.testing.assert_array_equal(got, np.transpose(rv, np.argsort(perm)))


@pytest.mark.parametrize("b_shape", [(4,), (3, 1), (1, 4), (1, 1)], ids=str)
def test_inputs_of_different_shapes_get_gradients_of_their_own_shape(b_shape):
    rng = np.random.default_rng(2)
    main = Program()
    with program_guard(main, Program()):
        a = layers.data("a", [3, 4], "float64")
        b = layers.data("b", list(b_shape), "float64")
        loss = layers.reduce_sum(layers.square(a * b + b))
        ga, gb = gradients(loss, [a, b])
    assert ga.shape == (3, 4) and gb.shape == b_shape
    av, bv = rng.standard_normal((3, 4)), rng.standard_normal(b_shape)
    got_a, got_b = Executor().run(main, feed={"a": av, "b": bv}, fetch_list=[ga, gb], scope=Scope())
    full = 2 * (av * bv + bv)
    np.testing.assert_allclose(got_a, full * bv, rtol=1e-12)
    want_b = (full * (av + 1)).sum(axis=tuple(i for i in range(2) if len(b_shape) < 2 - i or
                                              (len(b_shape) == 2 and b_shape[i] == 1)), keepdims=len(b_shape) == 2)
    np.testing.assert_allclose(got_b, np.reshape(want_b, b_shape), rtol=1e-12)


def test_classic_two_layer_network_matches_the_hand_derived_numpy_gradients():
    n, d_in, h, d_out = 64, 1000, 100, 10
    rng = np.random.default_rng(3)
    xs, ys = rng.standard_normal((n, d_in)), rng.standard_normal((n, d_out))
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, d_in], "float64")
        y = layers.data("y", [-1, d_out], "float64")
        w1 = layers.create_parameter([d_in, h], "float64", name="w1")
        w2 = layers.create_parameter([h, d_out], "float64", name="w2")
        y_pred = layers.relu(x @ w1) @ w2
        loss = layers.reduce_sum(layers.square(y_pred - y))
        params_grads = append_backward(loss)
    assert [(p.name, g.name) for p, g in params_grads] == [("w1", "w1@GRAD"), ("w2", "w2@GRAD")]
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    g1, g2 = exe.run(main, feed={"x": xs, "y": ys}, fetch_list=["w1@GRAD", "w2@GRAD"], scope=scope)
    w1v, w2v = scope["w1"], scope["w2"]
    hidden = xs @ w1v
    h_relu = np.maximum(hidden, 0)
    grad_y_pred = 2.0 * (h_relu @ w2v - ys)
    grad_w2 = h_relu.T @ grad_y_pred
    grad_h = grad_y_pred @ w2v.T
    grad_h[hidden < 0] = 0
    grad_w1 = xs.T @ grad_h
    np.testing.assert_allclose(g1, grad_w1, rtol=1e-10)
    np.testing.assert_allclose(g2, grad_w2, rtol=1e-10)


def _two_branch_program(no_grad_set=None, stop=False):
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3], "float64")
        a = layers.create_parameter([3, 3], "float64", name="a")
        b = layers.create_parameter([3, 3], "float64", name="b")
        left = layers.tanh(x @ a)
        if stop:
            left.stop_gradient = True
        loss = layers.reduce_sum(left * layers.sigmoid(x @ b))
        pg = append_backward(loss, no_grad_set=no_grad_set)
    return main, pg


@pytest.mark.parametrize("how", ["no_grad_set", "stop_gradient"])
def test_no_grad_set_and_stop_gradient_remove_exactly_the_ops_that_only_fed_them(how):
    full, pg_full = _two_branch_program()
    cut, pg_cut = _two_branch_program(no_grad_set={"tanh_0"} if how == "no_grad_set" else None,
                                      stop=how == "stop_gradient")
    assert [p.name for p, _ in pg_full] == ["a", "b"]
    assert [p.name for p, _ in pg_cut] == ["b"]
    full_ops = [(op.type, op.forward_op.type if op.forward_op else None)
                for op in full.global_block().ops if op.role == "backward"]
    cut_ops = [(op.type, op.forward_op.type if op.forward_op else None)
               for op in cut.global_block().ops if op.role == "backward"]
    # The grad ops of tanh and of the matmul that feeds it, and the mul's contribution to tanh_0, go away.
    removed = list(full_ops)
    for o in cut_ops:
        removed.remove(o)
    assert sorted(removed) == sorted([("elementwise_mul", "elementwise_mul"),  # d/d tanh_0
                                      ("tanh_grad", "tanh"), ("matmul", "matmul")])


def test_hessian_vector_product_of_a_gradient_matches_finite_differences():
    rng = np.random.default_rng(4)
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [4, 3], "float64")
        w = layers.data("w", [3, 2], "float64")
        v = layers.data("v", [3, 2], "float64")
        loss = layers.reduce_sum(layers.square(layers.tanh(x @ w)))
        (gw,) = gradients(loss, [w])
        gv = layers.reduce_sum(gw * v)
        (hvp,) = gradients(gv, [w])
    feed = {"x": rng.standard_normal((4, 3)), "w": rng.standard_normal((3, 2)), "v": rng.standard_normal((3, 2))}
    scope = Scope()
    (got,) = Executor().run(main, feed=feed, fetch_list=[hvp], scope=scope)
    numeric = numeric_gradient(main, feed, scope, gv.name, "w")
    np.testing.assert_allclose(got, numeric, rtol=1e-6, atol=1e-8)


def test_gradients_of_an_unrelated_input_is_none():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2], "float64")
        y = layers.data("y", [2], "float64")
        loss = layers.reduce_sum(layers.exp(x))
        gx, gy = gradients(loss, [x, y])
    assert gx is not None and gy is None


def test_second_call_never_collides_with_existing_names():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        loss = layers.reduce_sum(layers.square(x))
        (g1,) = gradients(loss, [x])
        (g2,) = gradients(loss, [x])
    assert g1.name == "x@GRAD" and g2.name != g1.name
    a, b = Executor().run(main, feed={"x": np.arange(3.0)}, fetch_list=[g1, g2], scope=Scope())
    np.testing.assert_array_equal(a, b)


def test_the_pass_is_deterministic():
    texts = []
    for _ in range(2):
        main, _ = _two_branch_program()
        texts.append(main.to_json())
    assert texts[0] == texts[1]


def test_target_gradients_scale_the_result():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        y = layers.square(x)
        dy = layers.data("dy", [3], "float64")
        (gx,) = gradients(y, [x], target_gradients=[dy])
    (got,) = Executor().run(main, feed={"x": np.array([1.0, 2.0, 3.0]), "dy": np.array([1.0, 0.5, -1.0])},
                            fetch_list=[gx], scope=Scope())
    np.testing.assert_allclose(got, [2.0, 2.0, -6.0])


def test_target_gradients_of_the_wrong_shape_are_rejected():
    from gradgen.framework import BackwardError

    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        y = layers.square(x)
        dy = layers.data("dy", [4], "float64")
        with pytest.raises(BackwardError, match=r"target_gradients\[0\] 'dy' is float64\[4\].*float64\[3\]"):
            gradients(y, [x], target_gradients=[dy])


def test_composite_expression_first_and_second_order():
    rng = np.random.default_rng(5)
    check_op_gradients(lambda x, w: layers.reduce_mean(layers.sigmoid(x @ w) * layers.tanh(x @ w), dim=1),
                       {"x": rng.standard_normal((3, 4)), "w": rng.standard_normal((4, 2))})
