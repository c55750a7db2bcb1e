"""The finite-difference checker evaluates a program as a function: state it updates is put back each time."""
from __future__ import annotations

import numpy as np

from gradgen.framework import Executor, Scope, gradients, optimizer
from gradgen.framework.tools.gradcheck import check_gradients
from gradgen.program import Program, layers, program_guard
from gradgen.program.initializer import Normal


def test_a_training_program_is_checked_at_one_point_and_its_scope_is_left_as_it_was():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 3], "float64")
        w = layers.create_parameter([3, 2], "float64", name="w", initializer=Normal(0.0, 1.0, seed=1))
        v = layers.create_parameter([2, 1], "float64", name="v", initializer=Normal(0.0, 1.0, seed=2))
        loss = layers.reduce_sum(layers.square(layers.tanh(x @ w) @ v))
        optimizer.Momentum(0.1, 0.9).minimize(loss)  # every run moves w, v and the velocities
        gw, gv = gradients(loss, [w, v])
    scope = Scope()
    Executor().run(startup, scope=scope)
    before = {n: np.array(scope[n]) for n in scope}
    feed = {"x": np.random.default_rng(0).standard_normal((4, 3))}
    reports = check_gradients(main, loss.name, {"w": gw.name, "v": gv.name}, feed, scope)
    assert [r.ok for r in reports] == [True, True], reports
    assert all(r.max_abs_error < 1e-6 for r in reports)
    for name, value in before.items():
        np.testing.assert_array_equal(scope[name], value, err_msg=name)
