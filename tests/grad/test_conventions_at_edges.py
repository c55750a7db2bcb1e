"""Gradients where the formula has an edge: ties of max/min, pow with exponent 0 at x = 0, and -1 dims that
turn out to differ at run time. References are hand-derived formulas and finite differences in float64."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import ExecutionError, Executor, Scope, forward_gradients, gradients
from gradgen.framework.tools.gradcheck import numeric_gradient
from gradgen.program import Program, layers, program_guard

from .checking import check_op_gradients, check_run_time_gradients


def _grads(build, feed, wrt):
    """Gradients of sum(build(...) * r) in ``wrt`` (names of ``feed``), with a random r."""
    main = Program()
    with program_guard(main, Program()):
        vs = {n: layers.data(n, list(a.shape), str(a.dtype)) for n, a in feed.items()}
        out = build(**vs)
        r = layers.data("r", list(out.shape), out.dtype)
        grads = gradients(layers.reduce_sum(out * r), [vs[n] for n in wrt])
    r_value = np.random.default_rng(9).standard_normal(out.shape)
    got = Executor(check_types=True).run(main, feed={**feed, "r": r_value}, fetch_list=grads, scope=Scope())
    return got, r_value


# -- ties --------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["reduce_max", "reduce_min"])
def test_a_reduction_splits_its_gradient_evenly_among_tied_elements(op):
    x = np.array([1.0, 3.0, 3.0, 0.0]) * (1 if op == "reduce_max" else -1)
    (dx,), r = _grads(lambda x: getattr(layers, op)(x), {"x": x}, ["x"])
    np.testing.assert_allclose(dx, [0.0, r / 2, r / 2, 0.0], rtol=1e-15)


def _split_reference(x, axes, extreme, dout_kept):
    mask = (x == extreme(x, axis=axes, keepdims=True)).astype(np.float64)
    return mask / mask.sum(axis=axes, keepdims=True) * dout_kept


@pytest.mark.parametrize("keep_dim", [False, True])
@pytest.mark.parametrize("dim", [None, 0, -1, [0, 2]], ids=str)
@pytest.mark.parametrize("op", ["reduce_max", "reduce_min"])
def test_ties_along_any_dims_share_the_output_gradient_and_sum_to_it(op, dim, keep_dim):
    x = np.random.default_rng(5).integers(0, 3, (2, 3, 4)).astype(np.float64)  # many ties
    (dx,), r = _grads(lambda x: getattr(layers, op)(x, dim=dim, keep_dim=keep_dim), {"x": x}, ["x"])
    axes = tuple(range(3)) if dim is None else tuple(np.atleast_1d(dim) % 3)
    r_kept = r if keep_dim else np.expand_dims(r, axes)
    np.testing.assert_allclose(dx, _split_reference(x, axes, np.max if op == "reduce_max" else np.min, r_kept),
                               rtol=1e-14)
    np.testing.assert_allclose(dx.sum(axis=axes, keepdims=True), r_kept, rtol=1e-12)


def test_a_reduction_over_a_size_one_dim_passes_the_gradient_through():
    x = np.array([[2.0], [2.0]])
    (dx,), r = _grads(lambda x: layers.reduce_max(x, dim=1), {"x": x}, ["x"])
    np.testing.assert_allclose(dx, r[:, None], rtol=1e-15)


@pytest.mark.parametrize("op", ["reduce_max", "reduce_min"])
def test_a_reduction_over_zero_rows_gives_an_empty_gradient(op):
    (dx,), _ = _grads(lambda x: getattr(layers, op)(x, dim=1), {"x": np.zeros((0, 3))}, ["x"])
    assert dx.shape == (0, 3)


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_elementwise_max_and_min_give_each_tied_input_half(op):
    x = np.array([1.0, 2.0, 3.0, -1.0])
    y = np.array([1.0, 5.0, 0.0, -1.0])
    (dx, dy), r = _grads(lambda x, y: getattr(layers, op)(x, y), {"x": x, "y": y}, ["x", "y"])
    x_wins = (x > y) if op == "maximum" else (x < y)
    tie = x == y
    np.testing.assert_allclose(dx, r * (x_wins + 0.5 * tie), rtol=1e-15)
    np.testing.assert_allclose(dy, r * (~x_wins & ~tie) + r * 0.5 * tie, rtol=1e-15)
    np.testing.assert_allclose(dx + dy, r, rtol=1e-15)  # the whole output gradient, once


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_a_broadcast_input_sums_the_halves_of_its_ties(op):
    x = np.array([[1.0, 2.0, 3.0], [1.0, 0.0, 3.0]])
    y = np.array([1.0, 2.0, 3.0])
    (dx, dy), r = _grads(lambda x, y: getattr(layers, op)(x, y), {"x": x, "y": y}, ["x", "y"])
    x_wins = (x > y) if op == "maximum" else (x < y)
    tie = x == y
    np.testing.assert_allclose(dx, r * (x_wins + 0.5 * tie), rtol=1e-15)
    np.testing.assert_allclose(dy, (r * (~x_wins & ~tie) + r * 0.5 * tie).sum(axis=0), rtol=1e-15)


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_elementwise_ties_agree_with_the_reduction_over_the_stacked_pair(op):
    """max(x, y) is reduce_max(stack([x, y])): both split a tie the same way."""
    x = np.array([[1.0, 2.0], [0.5, 0.5]])
    y = np.array([[1.0, 1.0], [0.5, 0.7]])
    (dx, dy), r = _grads(lambda x, y: getattr(layers, op)(x, y), {"x": x, "y": y}, ["x", "y"])
    reduce = layers.reduce_max if op == "maximum" else layers.reduce_min
    (sx, sy), _ = _grads(lambda x, y: reduce(layers.stack([x, y]), dim=0), {"x": x, "y": y}, ["x", "y"])
    np.testing.assert_allclose(dx, sx, rtol=1e-15)
    np.testing.assert_allclose(dy, sy, rtol=1e-15)


@pytest.mark.parametrize("op", ["maximum", "minimum"])
@pytest.mark.parametrize("y_shape", [(2, 3), (3,), (1, 3)], ids=str)
def test_elementwise_max_and_min_away_from_ties_match_finite_differences(op, y_shape):
    rng = np.random.default_rng(6)
    check_op_gradients(getattr(layers, op), {"x": rng.standard_normal((2, 3)), "y": rng.standard_normal(y_shape)})


# -- pow at 0 ----------------------------------------------------------------------------------------------------------

def test_pow_with_exponent_zero_has_gradient_zero_everywhere_also_at_zero():
    x = np.array([0.0, 2.0, -3.0, 0.0])
    (dx,), _ = _grads(lambda x: layers.pow(x, 0.0), {"x": x}, ["x"])
    np.testing.assert_array_equal(dx, np.zeros(4))


def test_pow_with_exponent_zero_second_order_is_zero_too():
    check_op_gradients(lambda x: layers.pow(x, 0.0), {"x": np.array([0.0, 0.5, 2.0, -3.0])})


def test_elementwise_pow_with_exponent_zero_at_zero():
    """d/dx x**y = y * x**(y - 1) is 0 where y = 0 (x**0 is the constant 1); d/dy x**y = x**y log x is 0 at x = 0
    for y >= 0 (x**y is 0 on that side), not -inf or NaN."""
    x = np.array([0.0, 0.0, 2.0, 0.0])
    y = np.array([0.0, 2.0, 0.0, 1.5])
    with np.errstate(divide="ignore", invalid="ignore"):
        (dx, dy), r = _grads(lambda x, y: layers.pow(x, y), {"x": x, "y": y}, ["x", "y"])
    np.testing.assert_allclose(dx, r * np.array([0.0, 0.0, 0.0, 0.0]), atol=0)
    np.testing.assert_allclose(dy, r * np.array([0.0, 0.0, np.log(2.0), 0.0]), rtol=1e-15, atol=0)


def test_elementwise_pow_with_a_broadcast_zero_exponent_at_zero():
    x = np.array([[0.0, 1.5], [0.0, 0.0]])
    with np.errstate(divide="ignore", invalid="ignore"):
        (dx,), _ = _grads(lambda x, y: layers.pow(x, y), {"x": x, "y": np.array([0.0, 0.0])}, ["x"])
    np.testing.assert_array_equal(dx, np.zeros((2, 2)))


def test_elementwise_pow_second_derivatives_at_zero_are_the_limits_not_nan():
    """At x = 0 (y >= 1): d2/dxdy x**y = x**(y-1) (1 + y log x) -> 0 and d2/dy2 x**y = x**y log(x)**2 -> 0, equal
    whichever order the derivatives are taken in; away from 0, the closed forms."""
    x, y = np.array([0.0, 0.0, 2.0]), np.array([2.0, 3.0, 2.5])
    main = Program()
    with program_guard(main, Program()):
        xv, yv = layers.data("x", [3], "float64"), layers.data("y", [3], "float64")
        dx, dy = gradients(layers.reduce_sum(layers.pow(xv, yv)), [xv, yv])
        dxdx, dxdy = gradients(layers.reduce_sum(dx), [xv, yv])
        dydx, dydy = gradients(layers.reduce_sum(dy), [xv, yv])
    with np.errstate(divide="ignore", invalid="ignore"):
        got = Executor(check_types=True).run(main, feed={"x": x, "y": y}, fetch_list=[dxdy, dydx, dydy],
                                             scope=Scope())
    log2 = np.log(2.0)
    mixed = np.array([0.0, 0.0, 2.0 ** 1.5 * (1 + 2.5 * log2)])
    np.testing.assert_allclose(got[0], mixed, rtol=1e-14, atol=0)
    np.testing.assert_allclose(got[1], mixed, rtol=1e-14, atol=0)
    np.testing.assert_allclose(got[2], np.array([0.0, 0.0, 2.0 ** 2.5 * log2 ** 2]), rtol=1e-14, atol=0)


def test_elementwise_pow_mixed_second_derivative_at_exponent_zero_is_one_over_x():
    """d2/dxdy x**y = x**(y-1) (1 + y log x), which is 1/x at y = 0 (JAX's testPowSecondDerivative: 0.25 at
    x = 4), in both orders and in forward-over-reverse; a mask on dx that is constant in y used to give 0."""
    x, y = np.array([4.0, 0.5, 3.0]), np.zeros(3)
    main = Program()
    with program_guard(main, Program()):
        xv, yv = layers.data("x", [3], "float64"), layers.data("y", [3], "float64")
        dx, dy = gradients(layers.reduce_sum(layers.pow(xv, yv)), [xv, yv])
        (dxdy,) = gradients(layers.reduce_sum(dx), [yv])
        (dydx,) = gradients(layers.reduce_sum(dy), [xv])
        (tangent_of_dx,) = forward_gradients([dx], [yv])
    got = Executor(check_types=True).run(main, feed={"x": x, "y": y}, fetch_list=[dxdy, tangent_of_dx, dydx],
                                         scope=Scope())
    np.testing.assert_allclose(got[0], 1 / x, rtol=1e-15, atol=0)
    np.testing.assert_allclose(got[1], 1 / x, rtol=1e-15, atol=0)
    np.testing.assert_allclose(got[2], 1 / x, rtol=1e-15, atol=0)


@pytest.mark.parametrize("y_shape", [(2, 3), (3,)], ids=str)
def test_elementwise_pow_with_zero_exponents_matches_finite_differences_first_and_second_order(y_shape):
    rng = np.random.default_rng(10)
    y = rng.uniform(-1.5, 2.5, y_shape)
    y.reshape(-1)[::2] = 0.0
    check_op_gradients(layers.pow, {"x": rng.uniform(0.5, 2.0, (2, 3)), "y": y})


def test_elementwise_pow_tangents_at_zero_equal_the_reverse_gradients():
    """Forward mode uses the reverse rule's values at x = 0 and y = 0: no 0 * log(0) NaN in a tangent."""
    x, y = np.array([0.0, 0.0, 2.0, 0.0]), np.array([0.0, 2.0, 0.0, 1.5])
    main = Program()
    with program_guard(main, Program()):
        xv, yv = layers.data("x", [4], "float64"), layers.data("y", [4], "float64")
        out = layers.pow(xv, yv)
        (tx,) = forward_gradients([out], [xv])
        (ty,) = forward_gradients([out], [yv])
    with np.errstate(divide="ignore", invalid="ignore"):
        got_x, got_y = Executor(check_types=True).run(main, feed={"x": x, "y": y}, fetch_list=[tx, ty], scope=Scope())
    np.testing.assert_array_equal(got_x, np.zeros(4))
    np.testing.assert_allclose(got_y, np.array([0.0, 0.0, np.log(2.0), 0.0]), rtol=1e-15, atol=0)


@pytest.mark.parametrize("y_shape", [(2, 3), (3,), (1,)], ids=str)
def test_elementwise_pow_away_from_zero_matches_finite_differences(y_shape):
    rng = np.random.default_rng(7)
    check_op_gradients(layers.pow, {"x": rng.uniform(0.5, 2.0, (2, 3)), "y": rng.uniform(-1.5, 2.5, y_shape)})


# -- -1 dims that differ at run time -----------------------------------------------------------------------------------

BINARY = {
    "add": layers.add, "subtract": layers.subtract, "multiply": layers.multiply, "divide": layers.divide,
    "pow": layers.pow, "maximum": layers.maximum, "minimum": layers.minimum,
}


@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("rows", [(4, 1), (1, 4), (4, 4)], ids=str)
def test_two_minus_one_dims_meeting_at_run_time_sum_back_to_each_input(op, rows):
    rng = np.random.default_rng(1)
    fed = {"x": rng.uniform(0.5, 2.0, (rows[0], 3)), "y": rng.uniform(0.5, 2.0, (rows[1], 3))}
    check_run_time_gradients(BINARY[op], {"x": [-1, 3], "y": [-1, 3]}, fed, (max(rows), 3))


def test_the_issue_example_gives_y_its_own_shape():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 3], "float64")
        y = layers.data("y", [-1, 3], "float64")
        gx, gy = gradients(layers.reduce_sum(x * y), [x, y])
    dx, dy = Executor().run(main, feed={"x": np.ones((4, 3)), "y": np.full((1, 3), 2.0)}, fetch_list=[gx, gy],
                            scope=Scope())
    np.testing.assert_array_equal(dx, np.full((4, 3), 2.0))
    np.testing.assert_array_equal(dy, np.full((1, 3), 4.0))  # the sum over the four rows y was broadcast to


@pytest.mark.parametrize("rows", [(4, 1, 4), (1, 1, 4)], ids=str)
def test_sum_of_addends_whose_minus_one_dims_differ_at_run_time_is_an_error(rows):
    """``sum`` promises one shape (its gradient hands each addend the output's): numpy would broadcast."""
    main = Program()
    with program_guard(main, Program()):
        xs = [layers.data(n, [-1, 3], "float64") for n in "xyz"]
        total = layers.sum(xs)
    feed = {n: np.ones((k, 3)) for n, k in zip("xyz", rows)}
    with pytest.raises(ExecutionError, match=r"\(sum\).*the addends have run-time shapes"):
        Executor().run(main, feed=feed, fetch_list=[total], scope=Scope())


@pytest.mark.parametrize("batches", [(2, 1), (1, 2)], ids=str)
def test_matmul_batch_dims_meeting_at_run_time(batches):
    rng = np.random.default_rng(2)
    fed = {"x": rng.standard_normal((batches[0], 2, 3)), "y": rng.standard_normal((batches[1], 3, 4))}
    check_run_time_gradients(layers.matmul, {"x": [-1, 2, 3], "y": [-1, 3, 4]}, fed, (2, 2, 4))


def test_where_branches_meeting_at_run_time():
    rng = np.random.default_rng(3)
    cond = rng.standard_normal((4, 3)) > 0

    main = Program()
    with program_guard(main, Program()):
        c = layers.data("c", [-1, 3], "bool")
        x = layers.data("x", [-1, 3], "float64")
        y = layers.data("y", [-1, 3], "float64")
        gx, gy = gradients(layers.reduce_sum(layers.where(c, x, y)), [x, y])
    dx, dy = Executor(check_types=True).run(
        main, feed={"c": cond, "x": rng.standard_normal((1, 3)), "y": rng.standard_normal((4, 3))},
        fetch_list=[gx, gy], scope=Scope())
    np.testing.assert_array_equal(dx, cond.sum(axis=0, keepdims=True))
    np.testing.assert_array_equal(dy, (~cond).astype(np.float64))


def _ops_for(build, declared):
    main = Program()
    with program_guard(main, Program()):
        vs = [layers.data(n, shape, "float64") for n, shape in declared.items()]
        gradients(layers.reduce_sum(build(*vs)), vs)
    return [op.type for op in main.global_block().ops if op.role == "backward"]


def test_shapes_that_are_provably_equal_get_no_reduction():
    # the same var twice, and a -1 dim that met only a static 1 or nothing
    assert "reduce_as" not in _ops_for(lambda x: x * x, {"x": [-1, 3]})
    assert _ops_for(lambda x, b: x + b, {"x": [-1, 3], "b": [3]}).count("reduce_as") == 1  # b's only
    assert _ops_for(lambda x, b: x + b, {"x": [-1, 3], "b": [1, 3]}).count("reduce_as") == 1
    assert _ops_for(lambda x, y: x * y, {"x": [-1, 3], "y": [-1, 3]}).count("reduce_as") == 2
    assert "reduce_as" not in _ops_for(lambda x: layers.sum([x, x]), {"x": [-1, 3]})
