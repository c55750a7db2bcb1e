"""Forward mode over the whole input domain: -1 and zero-size dims, ties, integer results."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, forward_gradients, gradients
from gradgen.program import Program, layers, program_guard

from .helpers import dot_product_sides


@pytest.mark.parametrize("batch", [0, 1, 4])
def test_unknown_and_zero_size_batch_dims(batch):
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 3], "float64")
        w = layers.data("w", [3, 2], "float64")
        b = layers.data("b", [2], "float64")
        vw, vb = layers.data("vw", [3, 2], "float64"), layers.data("vb", [2], "float64")
        u = layers.data("u", [-1, 2], "float64")
        y = layers.tanh(layers.add(layers.matmul(x, w), b))
        (t,) = forward_gradients(y, [w, b], [vw, vb])
        gw, gb = gradients(y, [w, b], target_gradients=[u])
    assert t.shape == (-1, 2)
    rng = np.random.default_rng(batch)
    feed = {"x": rng.standard_normal((batch, 3)), "w": rng.standard_normal((3, 2)), "b": rng.standard_normal(2),
            "vw": rng.standard_normal((3, 2)), "vb": rng.standard_normal(2), "u": rng.standard_normal((batch, 2))}
    jv, jtw, jtb = Executor(check_types=True).run(main, feed=feed, fetch_list=[t, gw, gb])
    assert jv.shape == (batch, 2)
    rhs = np.sum(jtw * feed["vw"]) + np.sum(jtb * feed["vb"])
    assert np.sum(jv * feed["u"]) == pytest.approx(rhs, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("build", [
    lambda x, y: layers.reduce_max(x, [1]),
    lambda x, y: layers.reduce_min(x, [0], keep_dim=True),
    lambda x, y: layers.maximum(x, y),
    lambda x, y: layers.minimum(x, y),
], ids=["reduce_max", "reduce_min", "maximum", "minimum"])
def test_ties_move_as_the_reverse_rule_sends_the_gradient(build):
    """Tied elements: both modes split evenly among the ties (the mean tangent for reductions, half of each
    operand's for max/min; issue 11 B), so forward mode stays the transpose of reverse mode."""
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3], "float64")
        y = layers.data("y", [2, 3], "float64")
        out = build(x, y)
    tied = np.array([[1.0, 2.0, 2.0], [1.0, 1.0, 0.0]])
    lhs, rhs = dot_product_sides(main, [out], [x, y], {"x": tied, "y": tied.copy()}, np.random.default_rng(0))
    assert lhs == pytest.approx(rhs, rel=1e-10)


def test_integer_values_carry_no_tangent_and_are_no_targets():
    """A float computed through an integer (a cast, an argmax) does not move; an integer target is refused."""
    from gradgen.framework import ForwardError

    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3], "float64")
        as_int = layers.cast(layers.scale(x, 3.0), "int64")
        back = layers.cast(as_int, "float64")
        picked = layers.cast(layers.argmax(x, 1), "float64")
        t_back, t_picked = forward_gradients([back, picked], [x])
        with pytest.raises(ForwardError, match=r"targets\[0\] 'cast_0' is int64\[2, 3\]: only floating-point"):
            forward_gradients(as_int, [x])
    assert t_back is None and t_picked is None


@pytest.mark.parametrize("build, want", [
    (lambda x, y: layers.reduce_max(x), 4.0 / 3.0),  # three ties at 2.0 (tangents 1, 0, 3): their mean
    (lambda x, y: layers.reduce_min(x, [0], keep_dim=True), [[0.5, 0.0, 4.0]]),
    (lambda x, y: layers.maximum(x, y), [[2.5, 1.0, 0.0], [2.0, 2.0, 0.0]]),  # y broadcast; half each at ties
], ids=["reduce_max-all", "reduce_min-keep", "maximum-broadcast"])
def test_a_tie_moves_by_the_mean_of_the_tied_tangents(build, want):
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3], "float64")
        y = layers.data("y", [3], "float64")
        vx, vy = layers.data("vx", [2, 3], "float64"), layers.data("vy", [3], "float64")
        (t,) = forward_gradients(build(x, y), [x, y], [vx, vy])
    feed = {"x": np.array([[2.0, 1.0, 0.0], [2.0, 2.0, 0.0]]), "y": np.array([2.0, 2.0, 0.0]),
            "vx": np.array([[1.0, 0.0, 4.0], [0.0, 3.0, 4.0]]), "vy": np.array([4.0, 1.0, -4.0])}
    (have,) = Executor(check_types=True).run(main, feed=feed, fetch_list=[t])
    np.testing.assert_allclose(have, want, rtol=0, atol=1e-15)


def test_reduce_prod_moves_exactly_at_zeros_with_a_run_time_dim_and_its_second_order_says_what_it_needs():
    """The product's tangent needs no division (one zero in a row still moves it); prod_others' tangent (forward
    over reverse) needs the reduced size at compile time, and says so naming the op."""
    from gradgen.framework import ForwardError

    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, -1], "float64")
        v = layers.data("v", [2, -1], "float64")
        y = layers.reduce_sum(layers.reduce_prod(x, [1]))
        (t,) = forward_gradients(y, [x], [v])
        (gx,) = gradients(y, [x])
        with pytest.raises(ForwardError, match=r"block 0, op #\d+ \(prod_others\).*needs the sizes of the reduced "
                                               r"dims \[1\] at compile time, got \[2, -1\]"):
            forward_gradients(gx, [x], [v])
    feed = {"x": np.array([[1.0, 2.0, 0.0], [3.0, 4.0, 5.0]]), "v": np.ones((2, 3))}
    (have,) = Executor(check_types=True).run(main, feed=feed, fetch_list=[t])
    assert have == pytest.approx(1 * 0 + 1 * 0 + 1 * 2 + 20 + 15 + 12, abs=1e-12)
