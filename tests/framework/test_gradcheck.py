"""The finite-difference checker evaluates a program as a function: state it updates is put back each time."""
from __future__ import annotations

import numpy as np

from gradgen.framework import Executor, Scope, gradients, optimizer
from gradgen.framework.tools.gradcheck import check_gradients, compare, relative_errors
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


def _reports_for_a_gradient_off_by(error: float, slope: float, rtol: float, atol: float):
    """check_gradients on loss = slope * sum(x), handed a "gradient" var fed as slope + error (the numeric one is
    slope, exactly up to rounding: the loss is linear)."""
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        layers.data("claimed", [3], "float64")
        loss = layers.reduce_sum(layers.scale(x, slope))
    feed = {"x": np.array([0.5, -1.0, 2.0]), "claimed": np.full(3, slope + error)}
    (report,) = check_gradients(main, loss.name, {"x": "claimed"}, feed, Scope(), delta=1e-3, rtol=rtol, atol=atol)
    return report


def test_the_verdict_is_the_printed_relative_error_against_rtol():
    """Issue 34: check-grad said `max rel error 1.465e-01 ok` under rtol 0.05 (the verdict allowed atol on top,
    the printed error did not). A gradient of 0.01 off by 0.0015 is within atol + rtol * 0.01 = 0.0055."""
    report = _reports_for_a_gradient_off_by(0.0015, 0.01, rtol=0.05, atol=5e-3)
    assert report.ok and report.max_rel_error <= 0.05, report
    report = _reports_for_a_gradient_off_by(0.006, 0.01, rtol=0.05, atol=5e-3)
    assert not report.ok and report.max_rel_error > 0.05, report


def test_the_boundary_passes_and_a_hair_beyond_it_fails():
    numeric = np.array([1.0, 0.0, -4.0])
    rtol, atol = 0.5, 0.25  # allowed: 0.75 at 1, 0.25 at 0, 2.25 at -4 (all exact in binary)
    at_limit = numeric + np.array([0.75, -0.25, 2.25])
    report = compare("v", at_limit, numeric, rtol, atol)
    assert report.ok and report.max_rel_error == rtol and report.max_abs_error == 2.25
    for k in range(3):
        beyond = at_limit.copy()
        beyond[k] += np.copysign(1e-12, beyond[k] - numeric[k])
        report = compare("v", beyond, numeric, rtol, atol)
        assert not report.ok and report.max_rel_error > rtol, (k, report)


def test_without_rtol_only_atol_counts_and_nan_never_passes():
    numeric = np.array([1.0, 100.0])
    assert compare("v", numeric + 0.125, numeric, 0.0, 0.125).ok
    report = compare("v", numeric + [0.0, 0.25], numeric, 0.0, 0.125)
    assert not report.ok and report.max_rel_error == np.inf
    report = compare("v", np.array([np.nan, 100.0]), numeric, 0.1, 0.1)
    assert not report.ok and np.isnan(report.max_rel_error)
    assert relative_errors(np.zeros(2), np.zeros(2), 0.1, 0.0).tolist() == [0.0, 0.0]
