"""layers.custom_gradient: a straight-through estimator, gradient clipping inside the graph and a stable
log-sum-exp with a hand-written gradient; both modes follow the rule; errors name the rule."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, check_custom_gradient, forward_gradients, gradients
from gradgen.framework.tools.cli import main as cli
from gradgen.program import Program, layers, program_guard
from gradgen.program.errors import GradgenError
from tests.forward.helpers import dot_product_sides
from tests.grad.checking import check_op_gradients

ste = layers.custom_gradient(layers.sign, lambda ins, outs, douts: douts[0], name="ste")
"""Straight-through estimator: the forward pass quantizes, the gradient passes through unchanged."""

clip_grad = layers.custom_gradient(lambda x: layers.scale(x, 1.0),
                                   lambda ins, outs, douts: layers.clip(douts[0], -1.0, 1.0), name="clip_grad")
"""The identity whose gradient is clipped to [-1, 1], in the graph."""


def _lse_forward(x):
    top = layers.reduce_max(x, [-1], keep_dim=True)
    return layers.add(layers.log(layers.reduce_sum(layers.exp(layers.subtract(x, top)), [-1], keep_dim=True)), top)


def _lse_grad(ins, outs, douts):
    """d lse / dx = softmax(x) = exp(x - lse): never overflows, and differentiable again."""
    return layers.multiply(douts[0], layers.exp(layers.subtract(ins[0], outs[0])))


logsumexp = layers.custom_gradient(_lse_forward, _lse_grad, name="logsumexp")


def _grad(fn, xv, weights):
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", list(xv.shape), "float64")
        w = layers.data("w", list(weights.shape), "float64")
        y = fn(x)
        (g,) = gradients(layers.reduce_sum(layers.multiply(y, w)), [x])
    return Executor().run(main, feed={"x": xv, "w": weights}, fetch_list=[y, g])


def test_straight_through_estimator():
    xv = np.array([[0.3, -1.2, 2.0], [-0.1, 0.0, 4.0]])
    weights = np.arange(6.0).reshape(2, 3)
    y, g = _grad(ste, xv, weights)
    np.testing.assert_array_equal(y, np.sign(xv))
    np.testing.assert_array_equal(g, weights)  # straight through, though sign's derivative is zero
    (report,) = check_custom_gradient(ste, {"x": xv + 0.05})
    assert not report.ok and report.max_abs_error > 0.5  # by design: the rule is not sign's derivative


def test_gradient_clipping_in_the_graph():
    xv = np.array([1.0, 2.0, 3.0])
    y, g = _grad(clip_grad, xv, np.array([0.5, -3.0, 7.0]))
    np.testing.assert_array_equal(y, xv)
    np.testing.assert_array_equal(g, [0.5, -1.0, 1.0])


def test_stable_logsumexp_matches_finite_differences_first_and_second_order():
    rng = np.random.default_rng(0)
    for shape in [(4,), (2, 5), (3, 1)]:
        check_op_gradients(logsumexp, {"x": rng.standard_normal(shape)})
    reports = check_custom_gradient(logsumexp, {"x": rng.standard_normal((3, 4))})
    assert all(r.ok for r in reports)


def test_stable_logsumexp_does_not_overflow():
    xv = np.array([[1000.0, 1000.0, 990.0]])
    y, g = _grad(logsumexp, xv, np.ones((1, 1)))
    np.testing.assert_allclose(y, [[1000.0 + np.log(2.0 + np.exp(-10.0))]], rtol=1e-15)
    np.testing.assert_allclose(g, np.exp(xv - y), rtol=1e-12)
    assert np.all(np.isfinite(g))


@pytest.mark.parametrize("fn", [ste, logsumexp], ids=lambda f: f.__name__)
def test_forward_mode_follows_the_rule(fn):
    """<J v, u> = <v, J^T u> with J^T the rule (linear in the output gradients): forward mode transposes the
    rule, not the forward body."""
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3], "float64")
        y = fn(x)
    rng = np.random.default_rng(1)
    lhs, rhs = dot_product_sides(main, [y], [x], {"x": rng.standard_normal((2, 3)) * 2}, rng)
    assert lhs == pytest.approx(rhs, rel=1e-10)


def test_forward_mode_of_the_straight_through_estimator_passes_the_tangent():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        v = layers.data("v", [3], "float64")
        (t,) = forward_gradients(ste(x), [x], [v])
    (got,) = Executor().run(main, feed={"x": np.array([0.5, -2.0, 1.0]), "v": np.array([1.0, 2.0, 3.0])},
                            fetch_list=[t])
    np.testing.assert_array_equal(got, [1.0, 2.0, 3.0])


def test_forward_mode_of_a_rule_not_linear_in_the_output_gradient_is_its_linearization_at_zero():
    """Clipping is not a vector-Jacobian product: forward mode transposes its slope at zero (the identity)."""
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        v = layers.data("v", [3], "float64")
        (t,) = forward_gradients(clip_grad(x), [x], [v])
    (got,) = Executor().run(main, feed={"x": np.array([0.5, -2.0, 1.0]), "v": np.array([5.0, -0.5, 30.0])},
                            fetch_list=[t])
    np.testing.assert_array_equal(got, [5.0, -0.5, 30.0])


def test_a_gradient_of_the_wrong_shape_is_a_build_error_naming_the_rule():
    bad = layers.custom_gradient(lambda x: layers.reduce_sum(x, [1]),
                                 lambda ins, outs, douts: douts[0], name="sum_rows")
    with program_guard(Program(), Program()):
        x = layers.data("x", [2, 3], "float64")
        with pytest.raises(GradgenError, match=r"custom_gradient.*custom gradient 'sum_rows': gradient 0 "
                                               r"'.*' is float64\[2\], but input 0 is float64\[2, 3\]"):
            bad(x)


def test_a_gradient_of_the_wrong_dtype_is_a_build_error():
    bad = layers.custom_gradient(lambda x: layers.scale(x, 2.0),
                                 lambda ins, outs, douts: layers.cast(douts[0], "float32"), name="to32")
    with program_guard(Program(), Program()):
        x = layers.data("x", [3], "float64")
        with pytest.raises(GradgenError, match=r"custom gradient 'to32': gradient 0 '.*' is float32\[3\]"):
            bad(x)


def test_saved_and_loaded_programs_keep_the_rule(tmp_path):
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        loss = layers.reduce_sum(layers.multiply(clip_grad(x), layers.scale(x, 5.0)))
        (g,) = gradients(loss, [x])
    path = tmp_path / "p.json"
    main.save(path)
    loaded = Program.load(path)
    feed = {"x": np.array([0.1, 1.0, -2.0])}
    (a,) = Executor().run(main, feed=feed, fetch_list=[g])
    (b,) = Executor().run(loaded, feed=feed, fetch_list=[g.name])
    np.testing.assert_array_equal(a, b)


def test_check_grad_names_the_custom_rules(tmp_path, capsys):
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        layers.reduce_sum(logsumexp(x), name="loss")
    main.save(tmp_path / "p.json")
    np.save(tmp_path / "x.npy", np.array([0.2, -1.0, 3.0]))
    code = cli(["check-grad", str(tmp_path / "p.json"), "--loss", "loss", "--feed", f"x={tmp_path / 'x.npy'}"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "custom rule 'logsumexp' (block 0, op #0)" in out


def test_hessian_vector_products_through_the_rule_agree_in_both_orders():
    """The gradient of a custom op is a ``call`` of the rule's body: forward mode through it (forward over
    reverse) equals reverse mode through it (reverse over reverse)."""
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 4], "float64")
        v = layers.data("v", [2, 4], "float64")
        r = layers.data("r", [2, 1], "float64")
        (g,) = gradients(layers.reduce_sum(layers.multiply(logsumexp(x), r)), [x])
        (forward,) = forward_gradients(g, [x], [v])
        (reverse,) = gradients(layers.reduce_sum(layers.multiply(g, v)), [x])
    assert any(op.type == "call" and op.role == "forward_grad" for op in main.global_block().ops)
    rng = np.random.default_rng(2)
    feed = {"x": rng.standard_normal((2, 4)), "v": rng.standard_normal((2, 4)), "r": rng.standard_normal((2, 1))}
    a, b = Executor().run(main, feed=feed, fetch_list=[forward, reverse])
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_the_decorator_form():
    @layers.custom_gradient(grad_fn=lambda ins, outs, douts: layers.scale(douts[0], 0.5))
    def halved_gradient(x):
        return layers.sin(x)

    xv = np.array([0.1, 1.0])
    y, g = _grad(halved_gradient, xv, np.ones(2))
    np.testing.assert_allclose(y, np.sin(xv), rtol=1e-15)
    np.testing.assert_array_equal(g, [0.5, 0.5])
    main = Program()
    with program_guard(main, Program()):
        halved_gradient(layers.data("x", [2], "float64"))
    (op,) = [op for op in main.global_block().ops if op.type == "custom_gradient"]
    assert op.attr("rule") == "halved_gradient"
