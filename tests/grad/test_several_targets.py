"""Several targets, one depending on another: gradients() returns the sum of every target's contribution.

The reference is the scalar S = sum_k sum(u_k * target_k), whose gradient is what ``gradients(targets, xs, us)``
means (TF's ``tf.gradients`` semantics); it is checked against finite differences of S, first and second order.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, gradients
from gradgen.framework.tools.gradcheck import numeric_gradient
from gradgen.program import Program, layers, program_guard

from .checking import check_op_gradients

X = np.array([0.1, -0.5, 0.7])
U0 = np.array([1.0, 2.0, 3.0])
U1 = np.array(1.5)


def _h_and_loss(x):
    h = layers.tanh(x)
    return h, layers.reduce_sum(h * h)


def _check(build, order, seeds: bool = True, x=X, rtol=1e-6):
    """``build(x) -> (h, loss)``; differentiate the targets picked by ``order`` (indices into (h, loss))."""
    main = Program()
    with program_guard(main, Program()):
        xv = layers.data("x", list(x.shape), "float64")
        us = [layers.data("u0", [3], "float64"), layers.data("u1", [], "float64")]
        values = build(xv)
        targets = [values[k] for k in order]
        (grad,) = gradients(targets, [xv], [us[k] for k in order] if seeds else None)
        weights = [us[k] if seeds else layers.fill_constant(list(values[k].shape), "float64", 1.0) for k in order]
        combined = layers.sum([layers.reduce_sum(t * w) for t, w in zip(targets, weights)])
        v = layers.data("v", list(x.shape), "float64")
        (hvp,) = gradients(layers.reduce_sum(grad * v), [xv])
        second = layers.reduce_sum(grad * v)
    feed = {"x": x, "u0": U0, "u1": U1, "v": np.array([0.3, -1.2, 0.8])}
    scope = Scope()
    got, got_hvp = Executor(check_types=True).run(main, feed=feed, fetch_list=[grad, hvp], scope=scope)
    np.testing.assert_allclose(got, numeric_gradient(main, feed, scope, combined.name, "x"), rtol=rtol, atol=1e-8)
    np.testing.assert_allclose(got_hvp, numeric_gradient(main, feed, scope, second.name, "x"), rtol=1e-5, atol=1e-7)
    return got


def test_the_issue_example_sums_both_contributions():
    got = _check(_h_and_loss, [0, 1])
    t = np.tanh(X)
    np.testing.assert_allclose(got, (U0 + 2.0 * U1 * t) * (1.0 - t * t), rtol=1e-12)  # hand-derived
    np.testing.assert_allclose(got, [1.28610006, 0.48260249, 3.05506724], rtol=1e-7)


@pytest.mark.parametrize("order", [list(p) for n in (1, 2) for p in itertools.permutations(range(2), n)],
                         ids=str)
def test_every_order_of_the_targets(order):
    _check(_h_and_loss, order)


@pytest.mark.parametrize("order", [[0, 0], [1, 1], [0, 1, 0], [1, 0, 1, 1]], ids=str)
def test_repeated_targets_count_once_per_listing(order):
    _check(_h_and_loss, order)


@pytest.mark.parametrize("order", [[0, 1], [1, 0]], ids=str)
def test_without_target_gradients_each_target_is_seeded_with_ones(order):
    _check(_h_and_loss, order, seeds=False)


def test_a_given_seed_and_a_default_seed_mix():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        u0 = layers.data("u0", [3], "float64")
        h, loss = _h_and_loss(x)
        (grad,) = gradients([h, loss], [x], [u0, None])
    (got,) = Executor(check_types=True).run(main, feed={"x": X, "u0": U0}, fetch_list=[grad], scope=Scope())
    t = np.tanh(X)
    np.testing.assert_allclose(got, (U0 + 2.0 * t) * (1.0 - t * t), rtol=1e-12)


def test_a_seed_that_is_the_only_contribution_is_used_as_it_is():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        u0 = layers.data("u0", [3], "float64")
        (grad,) = gradients([x], [x], [u0])
    assert grad.name == "u0"


def _cond_targets(x):
    """h from a cond (both branches differentiable), loss from h."""
    p = layers.greater_than(layers.reduce_sum(x), layers.fill_constant([], "float64", 0.0))
    h = layers.cond(p, lambda: layers.tanh(x), lambda: layers.sin(layers.scale(x, 2.0)))
    return h, layers.reduce_sum(layers.square(h))


def _while_targets(x):
    """h after three steps of h = sin(h) + x in a while_loop, loss from h."""
    limit, one = layers.fill_constant([], "int64", 3), layers.fill_constant([], "int64", 1)
    _, h = layers.while_loop(lambda t, h: layers.less_than(t, limit),
                             lambda t, h: [layers.add(t, one), layers.add(layers.sin(h), x)],
                             [layers.fill_constant([], "int64", 0), x])
    return h, layers.reduce_sum(layers.square(h))


@pytest.mark.parametrize("order", [[0, 1], [1, 0], [0, 1, 1]], ids=str)
@pytest.mark.parametrize("x", [X, -X], ids=["true_branch", "false_branch"])
def test_targets_made_by_a_cond(order, x):
    _check(_cond_targets, order, x=x)


@pytest.mark.parametrize("order", [[0, 1], [1, 0], [1, 0, 0]], ids=str)
def test_targets_made_by_a_while_loop(order):
    _check(_while_targets, order)


def test_a_target_inside_the_loop_state_and_one_after_it():
    """Both targets come out of one while op: the loop's h and its counter-free companion s = sum of h's."""
    def build(x):
        limit, one = layers.fill_constant([], "int64", 2), layers.fill_constant([], "int64", 1)
        _, h, s = layers.while_loop(lambda t, h, s: layers.less_than(t, limit),
                                    lambda t, h, s: [layers.add(t, one), layers.tanh(h), layers.add(s, h)],
                                    [layers.fill_constant([], "int64", 0), x, layers.scale(x, 0.5)])
        return h, layers.reduce_sum(layers.square(s))

    _check(build, [0, 1])
    _check(build, [1, 0, 0])


# -- targets inside control flow: a gradient sub-block differentiates every result of the block at once, seeded
# -- with the outer gradients, so a result made from another result is the same case one level down.

def _loop_where_one_result_reads_another(x):
    limit, one = layers.fill_constant([], "int64", 2), layers.fill_constant([], "int64", 1)

    def body(t, h, s):
        h_next = layers.tanh(h)
        return [layers.add(t, one), h_next, layers.add(s, layers.square(h_next))]  # s reads this step's h

    _, h, s = layers.while_loop(lambda t, h, s: layers.less_than(t, limit), body,
                                [layers.fill_constant([], "int64", 0), x, layers.scale(x, 0.5)])
    return layers.scale(h, 3.0) + s


def _cond_where_one_result_reads_another(x, p):
    def branch(f):
        def results():
            a = f(x)
            return a, layers.square(a)  # the second result reads the first
        return results

    a, b = layers.cond(p, branch(layers.tanh), branch(layers.sin))
    return a + b


def test_a_loop_body_whose_results_read_each_other():
    check_op_gradients(_loop_where_one_result_reads_another, {"x": X})


@pytest.mark.parametrize("taken", [True, False])
def test_cond_branches_whose_results_read_each_other(taken):
    check_op_gradients(_cond_where_one_result_reads_another, {"x": X}, extra_feed={"p": np.array(taken)})
