"""The forward-mode pass: where tangent ops go, what they are linked to, that they are ordinary ops (printed,
saved, run, differentiated again), and its errors."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, ForwardError, forward_gradients, gradients
from gradgen.framework.tools.gradcheck import numeric_gradient
from gradgen.framework import Scope
from gradgen.program import Program, layers, program_guard


def _chain():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3], "float64")
        w = layers.data("w", [3, 4], "float64")
        v = layers.data("v", [2, 3], "float64")
        h = layers.tanh(x @ w)
        y = layers.reduce_sum(layers.sin(h) * h, [1])
        (ty,) = forward_gradients(y, [x], [v])
    return main, ty


def test_each_op_is_followed_by_its_tangent_ops():
    main, _ = _chain()
    ops = main.global_block().ops
    current = None
    for op in ops:
        if op.role == "forward":
            current = op
        else:
            assert op.role == "forward_grad" and op.forward_op is current, (op, current)
    assert [op.type for op in ops if op.role == "forward"] == ["matmul", "tanh", "sin", "elementwise_mul",
                                                               "reduce_sum"]
    assert "<- tangent of #0 matmul" in str(main)


def test_tangent_ops_are_saved_loaded_and_run_like_any_other():
    main, ty = _chain()
    loaded = Program.from_json(main.to_json())
    assert loaded.to_json() == main.to_json()
    assert [op.role for op in loaded.global_block().ops] == [op.role for op in main.global_block().ops]
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((2, 3)), "w": rng.standard_normal((3, 4)), "v": rng.standard_normal((2, 3))}
    (a,) = Executor().run(main, feed=feed, fetch_list=[ty])
    (b,) = Executor().run(loaded, feed=feed, fetch_list=[ty.name])
    np.testing.assert_array_equal(a, b)


def test_tangents_are_differentiable_again():
    """Reverse over forward: d/dx <J(x) v, u> checked with finite differences."""
    main, ty = _chain()
    with program_guard(main, Program()):
        u = layers.data("u", [2], "float64")
        s = layers.reduce_sum(ty * u)
        (gx,) = gradients(s, [main.global_block().var("x")])
    rng = np.random.default_rng(1)
    feed = {"x": rng.standard_normal((2, 3)), "w": rng.standard_normal((3, 4)), "v": rng.standard_normal((2, 3)),
            "u": rng.standard_normal(2)}
    scope = Scope()
    (got,) = Executor().run(main, feed=feed, fetch_list=[gx], scope=scope)
    np.testing.assert_allclose(got, numeric_gradient(main, feed, scope, s.name, "x"), rtol=1e-6, atol=1e-8)


def test_default_tangents_are_ones_and_independent_targets_get_none():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        c = layers.data("c", [3], "float64")
        y, z = layers.exp(x), layers.cos(c)
        ty, tz = forward_gradients([y, z], [x])
    assert tz is None
    xv = np.array([0.1, -0.3, 2.0])
    (got,) = Executor().run(main, feed={"x": xv, "c": xv}, fetch_list=[ty])
    np.testing.assert_allclose(got, np.exp(xv), rtol=1e-15)


def test_a_target_that_is_an_input_has_its_seed_as_tangent():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2], "float64")
        (tx,) = forward_gradients(x, [x])
    (got,) = Executor().run(main, feed={"x": np.zeros(2)}, fetch_list=[tx])
    np.testing.assert_array_equal(got, np.ones(2))


def test_an_overwritten_input_is_seeded_at_its_last_write():
    """Like ``gradients``, the derivative is with respect to the input's last value before the targets."""
    main = Program()
    with program_guard(main, Program()):
        a = layers.data("a", [2], "float64")
        x = layers.data("x", [2], "float64")
        layers.assign(layers.square(a), output=x)
        y = layers.sin(x)
        (ty,) = forward_gradients(y, [x])
    xv = np.array([0.5, 1.0])
    (got,) = Executor().run(main, feed={"a": xv}, fetch_list=[ty])  # x is the assign's (a feed would override it)
    np.testing.assert_allclose(got, np.cos(xv ** 2), rtol=1e-15)


def test_errors_name_the_vars_and_types():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3], "float64")
        n = layers.data("n", [2], "int64")
        bad = layers.data("bad", [3, 2], "float64")
        y = layers.exp(x)
    with pytest.raises(ForwardError, match=r"input_tangents\[0\] 'bad' is float64\[3, 2\] but input 'x' is "
                                           r"float64\[2, 3\]"):
        forward_gradients(y, [x], [bad])
    with pytest.raises(ForwardError, match=r"inputs\[0\] 'n' is int64\[2\]: only floating-point"):
        forward_gradients(y, [n])
    with pytest.raises(ForwardError, match="1 input_tangents for 2 inputs"):
        forward_gradients(y, [x, x], [None])
    other = Program()
    with program_guard(other, Program()):
        z = layers.data("x", [2, 3], "float64")
    with pytest.raises(ForwardError, match="not a var of the targets' program"):
        forward_gradients(y, [z])


def test_a_square_by_multiplication_takes_one_product():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        v = layers.data("v", [3], "float64")
        (t,) = forward_gradients(x * x, [x], [v])
    assert [op.type for op in main.global_block().ops if op.role == "forward_grad"] == ["elementwise_mul", "scale"]
    xv, vv = np.array([1.0, -2.0, 0.5]), np.array([0.3, 0.1, -4.0])
    (got,) = Executor().run(main, feed={"x": xv, "v": vv}, fetch_list=[t])
    np.testing.assert_allclose(got, 2 * xv * vv, rtol=1e-15)


def test_a_second_call_adds_only_the_ops_its_own_tangents_need():
    """Issue 34: a second call also pushed its tangents through the first call's tangent ops (55 ops where 18
    were needed); now each call adds the same ops, and both tangents are right."""
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3], "float64")
        w = layers.data("w", [3, 4], "float64")
        v1 = layers.data("v1", [3, 4], "float64")
        v2 = layers.data("v2", [3, 4], "float64")
        y = layers.reduce_sum(layers.square(layers.tanh(x @ w)))
        sizes = [len(main.global_block().ops)]
        (t1,) = forward_gradients(y, [w], [v1])
        sizes.append(len(main.global_block().ops))
        (t2,) = forward_gradients(y, [w], [v2])
        sizes.append(len(main.global_block().ops))
    assert sizes[2] - sizes[1] == sizes[1] - sizes[0] == 5, sizes
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((2, 3)), "w": rng.standard_normal((3, 4)), "v1": rng.standard_normal((3, 4))}
    feed["v2"] = -3.0 * feed["v1"]
    got1, got2 = Executor().run(main, feed=feed, fetch_list=[t1, t2])
    np.testing.assert_allclose(got2, -3.0 * got1, rtol=1e-12)


def test_ops_the_targets_do_not_depend_on_get_no_tangent_ops():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        side = layers.cos(x)  # reads x, before the target, but the target does not need it
        y = layers.exp(x)
        forward_gradients(y, [x])
    made_for = [op.forward_op.type for op in main.global_block().ops if op.role == "forward_grad"]
    assert "cos" not in made_for and "exp" in made_for, made_for
    assert side.name in main.global_block().vars


def test_an_input_tangent_made_after_the_ops_it_moves_is_refused_at_build_time():
    """Its tangent ops would be inserted before it exists (a FeedError at run time, naming the wrong cause)."""
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        y = layers.tanh(x)
        late = layers.fill_constant([3], "float64", 1.0)
        with pytest.raises(ForwardError, match=r"'fill_constant_0' is made by op #1 \(fill_constant\), after op #0 "
                                               r"\(tanh\) reads input 'x'"):
            forward_gradients([y], [x], [late])
    assert [op.type for op in main.global_block().ops] == ["tanh", "fill_constant"]  # nothing added
