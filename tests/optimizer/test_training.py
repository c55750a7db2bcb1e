"""Optimizers step by step against direct numpy forms of their update rules, and the mlp example end to end."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, optimizer
from gradgen.framework.tools.examples import EXAMPLES
from gradgen.program import Program, layers, program_guard
from gradgen.program.initializer import Normal


def test_mlp_example_matches_the_hand_written_numpy_loop_after_500_steps():
    ex = EXAMPLES["mlp"]()
    with program_guard(ex.main, ex.startup):
        ex.make_optimizer().minimize(ex.loss)
    exe, scope = Executor(), Scope()
    exe.run(ex.startup, scope=scope)
    w1, w2 = scope["w1"].copy(), scope["w2"].copy()
    xs, ys = ex.feed["x"], ex.feed["y"]
    for _ in range(500):
        (loss,) = exe.run(ex.main, feed=ex.feed, fetch_list=[ex.loss], scope=scope)
    for _ in range(500):  # the tutorial's loop, verbatim in spirit
        h = xs @ w1
        h_relu = np.maximum(h, 0)
        y_pred = h_relu @ w2
        numpy_loss = np.square(y_pred - ys).sum()
        grad_y_pred = 2.0 * (y_pred - ys)
        grad_w2 = h_relu.T @ grad_y_pred
        grad_h = grad_y_pred @ w2.T
        grad_h[h < 0] = 0
        grad_w1 = xs.T @ grad_h
        w1 -= 1e-6 * grad_w1
        w2 -= 1e-6 * grad_w2
    assert float(loss) == pytest.approx(numpy_loss, rel=1e-9)
    np.testing.assert_allclose(scope["w1"], w1, rtol=1e-9, atol=1e-12)


def _quadratic(opt, steps=5, **build):
    """Minimize sum((w - t)^2 * c) from a fixed start; returns the parameter after each step and (w0, t, c)."""
    rng = np.random.default_rng(0)
    t, c = rng.standard_normal(6), rng.uniform(0.5, 2.0, 6)
    main, startup = Program(), Program()
    with program_guard(main, startup):
        w = layers.create_parameter([6], "float64", name="w", initializer=Normal(0.0, 1.0, seed=3))
        target = layers.data("t", [6], "float64")
        weight = layers.data("c", [6], "float64")
        loss = layers.reduce_sum(layers.square(w - target) * weight)
        ops, params_grads = opt.minimize(loss)
    assert [p.name for p, _ in params_grads] == ["w"] and all(op.role == "optimize" for op in ops)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    w0 = scope["w"].copy()
    trajectory = []
    for _ in range(steps):
        exe.run(main, feed={"t": t, "c": c}, scope=scope)
        trajectory.append(scope["w"].copy())
    return trajectory, w0, t, c


def _grad(w, t, c):
    return 2.0 * (w - t) * c


@pytest.mark.parametrize("weight_decay", [None, 0.1])
def test_sgd(weight_decay):
    got, w, t, c = _quadratic(optimizer.SGD(0.1, weight_decay=weight_decay))
    for step in got:
        g = _grad(w, t, c) + (weight_decay or 0.0) * w
        w = w - 0.1 * g
        np.testing.assert_allclose(step, w, rtol=1e-12)


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum(nesterov):
    got, w, t, c = _quadratic(optimizer.Momentum(0.05, momentum=0.9, use_nesterov=nesterov))
    v = np.zeros_like(w)
    for step in got:
        g = _grad(w, t, c)
        v = 0.9 * v + g
        w = w - 0.05 * (g + 0.9 * v if nesterov else v)
        np.testing.assert_allclose(step, w, rtol=1e-12)


def test_adam():
    got, w, t, c = _quadratic(optimizer.Adam(0.01, beta1=0.8, beta2=0.95, epsilon=1e-7), steps=6)
    m1, m2 = np.zeros_like(w), np.zeros_like(w)
    for k, step in enumerate(got, start=1):
        g = _grad(w, t, c)
        m1 = 0.8 * m1 + 0.2 * g
        m2 = 0.95 * m2 + 0.05 * g * g
        m1_hat, m2_hat = m1 / (1 - 0.8 ** k), m2 / (1 - 0.95 ** k)
        w = w - 0.01 * m1_hat / (np.sqrt(m2_hat) + 1e-7)
        np.testing.assert_allclose(step, w, rtol=1e-12)


def test_global_norm_clipping():
    got, w, t, c = _quadratic(optimizer.SGD(0.1, grad_clip=0.5))
    for step in got:
        g = _grad(w, t, c)
        g = g * 0.5 / max(np.linalg.norm(g), 0.5)
        w = w - 0.1 * g
        np.testing.assert_allclose(step, w, rtol=1e-12)


def _train_example(name: str):
    """Train a built-in example for its default steps; returns it, its executor and scope, and the losses."""
    ex = EXAMPLES[name]()
    with program_guard(ex.main, ex.startup):
        ex.make_optimizer().minimize(ex.loss)
    exe, scope = Executor(), Scope()
    exe.run(ex.startup, scope=scope)
    losses = [float(exe.run(ex.main, feed=ex.feed, fetch_list=[ex.loss], scope=scope)[0]) for _ in range(ex.steps)]
    return ex, exe, scope, losses


def test_cnn_example_loss_falls_by_at_least_half_within_its_default_steps():
    _, _, _, losses = _train_example("cnn")
    assert losses[-1] <= 0.5 * losses[0], (losses[0], losses[-1])


def test_rnn_example_trains_through_its_while_loop():
    """The loop's gradient drives Adam: the loss falls a hundredfold, and the fed T decides the trip count."""
    ex, exe, scope, losses = _train_example("rnn")
    assert losses[-1] <= 0.01 * losses[0], (losses[0], losses[-1])
    loop = next(op for op in ex.main.global_block().ops if op.type == "while" and op.role == "forward")
    (steps,) = exe.run(ex.main, feed={**ex.feed, "T": np.int64(5)}, fetch_list=[loop.output("Steps")[0]], scope=scope)
    assert steps == 5
