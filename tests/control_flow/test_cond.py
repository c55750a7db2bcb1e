"""cond: the taken branch's values, gradients of both branches against finite differences, errors."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, gradients
from gradgen.program import Program, layers, program_guard
from gradgen.program.errors import OpError, ProgramError
from tests.grad.checking import check_op_gradients


def _two_branch(x, y, p):
    return layers.cond(p, lambda: layers.multiply(layers.tanh(x), y),
                       lambda: layers.add(layers.sin(x), layers.scale(x, 3.0)))


@pytest.mark.parametrize("taken", [True, False])
@pytest.mark.parametrize("y_shape", [[2, 3], [3], [1, 3]])
def test_gradients_of_the_taken_branch_match_finite_differences(taken, y_shape):
    rng = np.random.default_rng(0)
    check_op_gradients(_two_branch, {"x": rng.standard_normal((2, 3)), "y": rng.standard_normal(y_shape)},
                       extra_feed={"p": np.array(taken)})


def test_a_branch_that_does_not_use_an_input_gives_it_a_zero_gradient():
    rng = np.random.default_rng(1)
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3], "float64")
        y = layers.data("y", [2, 3], "float64")
        p = layers.data("p", [], "bool")
        loss = layers.reduce_sum(_two_branch(x, y, p))
        gx, gy = gradients(loss, [x, y])
    feed = {"x": rng.standard_normal((2, 3)), "y": rng.standard_normal((2, 3))}
    exe = Executor(check_types=True)
    dx, dy = exe.run(main, feed={**feed, "p": np.array(False)}, fetch_list=[gx, gy], scope=Scope())
    np.testing.assert_array_equal(dy, np.zeros((2, 3)))
    np.testing.assert_allclose(dx, np.cos(feed["x"]) + 3.0)
    dx, dy = exe.run(main, feed={**feed, "p": np.array(True)}, fetch_list=[gx, gy], scope=Scope())
    np.testing.assert_allclose(dy, np.tanh(feed["x"]))


def test_a_branch_may_return_an_outer_var_unchanged():
    rng = np.random.default_rng(2)
    for taken in (True, False):
        check_op_gradients(lambda x, p: layers.cond(p, lambda: x, lambda: layers.exp(x)),
                           {"x": rng.standard_normal((4,))}, extra_feed={"p": np.array(taken)})


def test_several_results_and_a_predicate_computed_in_the_program():
    rng = np.random.default_rng(3)

    def build(x, w):
        big = layers.greater_than(layers.reduce_sum(x), layers.fill_constant([], "float64", 0.0))
        a, b = layers.cond(big, lambda: (layers.matmul(x, w), layers.exp(x)),
                           lambda: (layers.scale(layers.matmul(x, w), -1.0), layers.square(x)))
        return layers.add(layers.reduce_sum(a), layers.reduce_sum(b))

    x = rng.standard_normal((2, 3))
    for sign in (1.0, -1.0):  # both branches, chosen by the data
        check_op_gradients(build, {"x": sign * np.abs(x), "w": rng.standard_normal((3, 2))})


def test_branches_with_different_shapes_are_a_build_error_naming_both():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3], "float64")
        p = layers.data("p", [], "bool")
        with pytest.raises(OpError, match=r"true branch '.*' is float64\[2, 3\], false branch '.*' is float64\[3, 2\]"):
            layers.cond(p, lambda: layers.exp(x), lambda: layers.transpose(x, [1, 0]))
        with pytest.raises(ProgramError, match="different numbers of vars: true_fn 1 .* false_fn 2"):
            layers.cond(p, lambda: x, lambda: (x, x))
        with pytest.raises(OpError, match="Cond must be bool, got float64"):
            layers.cond(x, lambda: x, lambda: x)
