"""The optimizers step for step against torch.optim on a small MLP: same weights, same data, same hyperparameters.

torch is the oracle (the ``oracle`` extra); the check is skipped without it, and fails under
``GRADGEN_REQUIRE_EXTRAS``. Lamb has no torch.optim counterpart: it is checked against a numpy transcription of
the LAMB paper's Algorithm 2 instead.
"""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, optimizer
from gradgen.program import Program, layers, program_guard
from tests.extras import require

try:
    import torch
except ImportError:  # pragma: no cover - depends on the environment
    torch = None

STEPS = 12
SHAPES = {"w1": (4, 5), "b1": (5,), "w2": (5, 3), "b2": (3,)}
RTOL = {"float64": 1e-10, "float32": 1e-5}


def _data(dtype: str):
    rng = np.random.default_rng(7)
    init = {name: rng.standard_normal(shape).astype(dtype) for name, shape in SHAPES.items()}
    return init, rng.standard_normal((8, 4)).astype(dtype), rng.standard_normal((8, 3)).astype(dtype)


def _gradgen(opt, dtype: str):
    """Train gradgen's MLP for STEPS steps; returns its scope after each step (copied)."""
    init, x, y = _data(dtype)
    main, startup = Program(), Program()
    with program_guard(main, startup):
        xv, yv = layers.data("x", [-1, 4], dtype), layers.data("y", [-1, 3], dtype)
        w = {name: layers.create_parameter(list(shape), dtype, name=name) for name, shape in SHAPES.items()}
        h = layers.tanh(layers.matmul(xv, w["w1"]) + w["b1"])
        loss = layers.mean(layers.square(layers.matmul(h, w["w2"]) + w["b2"] - yv))
        opt.minimize(loss)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    for name, value in init.items():
        scope.set(name, value.copy())
    states = []
    for _ in range(STEPS):
        exe.run(main, feed={"x": x, "y": y}, scope=scope)
        states.append({name: np.array(scope[name]) for name in scope})
    return states


def _torch_params(dtype: str):
    init, x, y = _data(dtype)
    params = {name: torch.tensor(value, requires_grad=True) for name, value in init.items()}
    return params, torch.tensor(x), torch.tensor(y)


def _torch_step(params, x, y) -> None:
    h = torch.tanh(x @ params["w1"] + params["b1"])
    loss = torch.mean(torch.square(h @ params["w2"] + params["b2"] - y))
    loss.backward()


def _torch(make, dtype: str, state_names: dict[str, str]):
    """The same MLP in torch; after each step its parameters and the states ``state_names`` maps
    (torch state key -> gradgen var suffix), named as gradgen names them."""
    require(None if torch is not None else "torch", "pip install -e '.[oracle]'")
    params, x, y = _torch_params(dtype)
    opt = make(list(params.values()))
    states = []
    for _ in range(STEPS):
        opt.zero_grad()
        _torch_step(params, x, y)
        opt.step()
        snap = {name: p.detach().numpy().copy() for name, p in params.items()}
        for name, p in params.items():
            for key, suffix in state_names.items():
                snap[f"{name}@{suffix}"] = opt.state[p][key].detach().numpy().copy()
        states.append(snap)
    return states


def _compare(got, want, dtype: str) -> None:
    """Every array within rtol of the oracle's, and elements near 0 within rtol of the array's largest one
    (an element that cancels to 1e-4 in a unit-sized weight carries the weight's rounding, not its own)."""
    for step, (g, w) in enumerate(zip(got, want), start=1):
        for name, value in w.items():
            assert g[name].dtype == np.dtype(dtype), (name, g[name].dtype)
            np.testing.assert_allclose(g[name], value, rtol=RTOL[dtype], atol=RTOL[dtype] * np.abs(value).max(),
                                       err_msg=f"step {step}: {name}")


DTYPES = ["float64", "float32"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("momentum, centered, weight_decay, eps", [
    (0.0, False, None, 1e-8), (0.9, False, None, 1e-8), (0.0, True, None, 1e-6), (0.5, True, 0.1, 1e-3),
    (0.9, False, 0.01, 1e-2)])
def test_rmsprop(dtype, momentum, centered, weight_decay, eps):
    got = _gradgen(optimizer.RMSProp(0.01, rho=0.9, epsilon=eps, momentum=momentum, centered=centered,
                                     weight_decay=weight_decay), dtype)
    states = {"square_avg": "mean_square"}
    if centered:
        states["grad_avg"] = "mean_grad"
    if momentum:
        states["momentum_buffer"] = "moment"
    want = _torch(lambda ps: torch.optim.RMSprop(ps, lr=0.01, alpha=0.9, eps=eps, momentum=momentum,
                                                 centered=centered, weight_decay=weight_decay or 0.0),
                  dtype, states)
    _compare(got, want, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("initial, weight_decay, eps", [(0.0, None, 1e-10), (0.1, None, 1e-6), (0.5, 0.05, 1e-3)])
def test_adagrad(dtype, initial, weight_decay, eps):
    got = _gradgen(optimizer.Adagrad(0.1, epsilon=eps, initial_accumulator_value=initial, weight_decay=weight_decay),
                   dtype)
    want = _torch(lambda ps: torch.optim.Adagrad(ps, lr=0.1, eps=eps, initial_accumulator_value=initial,
                                                 weight_decay=weight_decay or 0.0), dtype, {"sum": "moment"})
    _compare(got, want, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("weight_decay, betas, eps", [(0.01, (0.9, 0.999), 1e-8), (0.0, (0.8, 0.95), 1e-6),
                                                      (0.3, (0.5, 0.9), 1e-3)])
def test_adamw(dtype, weight_decay, betas, eps):
    got = _gradgen(optimizer.AdamW(0.02, beta1=betas[0], beta2=betas[1], epsilon=eps, weight_decay=weight_decay),
                   dtype)
    want = _torch(lambda ps: torch.optim.AdamW(ps, lr=0.02, betas=betas, eps=eps, weight_decay=weight_decay),
                  dtype, {"exp_avg": "moment1", "exp_avg_sq": "moment2"})
    _compare(got, want, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_adam_and_its_l2_weight_decay(dtype):
    """torch.optim.Adam's weight_decay adds decay * param to the gradient: gradgen's weight_decay does the same."""
    got = _gradgen(optimizer.Adam(0.02, epsilon=1e-7, weight_decay=0.1), dtype)
    want = _torch(lambda ps: torch.optim.Adam(ps, lr=0.02, eps=1e-7, weight_decay=0.1), dtype,
                  {"exp_avg": "moment1", "exp_avg_sq": "moment2"})
    _compare(got, want, dtype)


# -- Lamb: no torch.optim.Lamb, so the paper's Algorithm 2, transcribed -------------------------------------------
def _lamb_paper(init, grad_of, lr, decay, b1, b2, eps):
    """LAMB, You et al. 2020 ("Large Batch Optimization for Deep Learning"), Algorithm 2, per layer l, phi = identity:
        m_t = b1 m_{t-1} + (1 - b1) g_t          v_t = b2 v_{t-1} + (1 - b2) g_t^2
        m_t <- m_t / (1 - b1^t)                   v_t <- v_t / (1 - b2^t)
        r_t = m_t / (sqrt(v_t) + eps)
        x_{t+1} = x_t - lr phi(||x_t||) / ||r_t + decay x_t|| (r_t + decay x_t)
    with Paddle's lamb op's rule for the ratio's 0 cases: it is 1 when ||x_t|| or ||r_t + decay x_t|| is 0."""
    x = {k: v.copy() for k, v in init.items()}
    m = {k: np.zeros_like(v) for k, v in init.items()}
    v = {k: np.zeros_like(v) for k, v in init.items()}
    out = []
    for t in range(1, STEPS + 1):
        g = grad_of(x)
        for k in x:
            m[k] = b1 * m[k] + (1 - b1) * g[k]
            v[k] = b2 * v[k] + (1 - b2) * g[k] ** 2
            r = (m[k] / (1 - b1 ** t)) / (np.sqrt(v[k] / (1 - b2 ** t)) + eps)
            update = r + decay * x[k]
            x_norm, u_norm = np.linalg.norm(x[k]), np.linalg.norm(update)
            ratio = x_norm / u_norm if x_norm > 0 and u_norm > 0 else 1.0
            x[k] = x[k] - lr * ratio * update
        out.append({**{k: a.copy() for k, a in x.items()}, **{f"{k}@moment1": a.copy() for k, a in m.items()},
                    **{f"{k}@moment2": a.copy() for k, a in v.items()}})
    return out


def _mlp_grads(x, y):
    """The MLP's gradients in numpy, written out by hand (mean of squares over 8 x 3 outputs)."""
    def grad_of(p):
        a = x @ p["w1"] + p["b1"]
        h = np.tanh(a)
        d_out = 2.0 * (h @ p["w2"] + p["b2"] - y) / y.size
        d_a = (d_out @ p["w2"].T) * (1 - h * h)
        return {"w1": x.T @ d_a, "b1": d_a.sum(0), "w2": h.T @ d_out, "b2": d_out.sum(0)}

    return grad_of


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("decay, betas, eps", [(0.01, (0.9, 0.999), 1e-6), (0.0, (0.8, 0.9), 1e-8),
                                               (0.5, (0.5, 0.99), 1e-3)])
def test_lamb_follows_the_papers_algorithm(dtype, decay, betas, eps):
    init, x, y = _data(dtype)
    got = _gradgen(optimizer.Lamb(0.05, lamb_weight_decay=decay, beta1=betas[0], beta2=betas[1], epsilon=eps),
                   dtype)
    want = _lamb_paper({k: v.astype("float64") for k, v in init.items()},
                       _mlp_grads(x.astype("float64"), y.astype("float64")), 0.05, decay, *betas, eps)
    _compare(got, want, dtype)


def test_lamb_takes_the_trust_ratio_as_1_when_the_parameter_is_zero():
    """A zero parameter (a bias at its start) would get ratio 0 and never move: Paddle takes 1 instead."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        b = layers.create_parameter([3], "float64", name="b")
        t = layers.data("t", [3], "float64")
        optimizer.Lamb(0.1, lamb_weight_decay=0.0).minimize(layers.reduce_sum(layers.square(b - t)))
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    scope.set("b", np.zeros(3))
    target = np.array([1.0, -2.0, 0.5])
    exe.run(main, feed={"t": target}, scope=scope)
    # first step: m_hat = g, v_hat = g^2, r = g / (|g| + eps) ~ sign(g) = -sign(target); ratio 1
    np.testing.assert_allclose(scope["b"], 0.1 * np.sign(target), rtol=1e-6)


@pytest.mark.parametrize("make", [lambda lr: optimizer.RMSProp(lr, momentum=0.5, centered=True),
                                  lambda lr: optimizer.Adagrad(lr), lambda lr: optimizer.AdamW(lr),
                                  lambda lr: optimizer.Lamb(lr)], ids=["rmsprop", "adagrad", "adamw", "lamb"])
def test_a_learning_rate_schedule_drives_the_new_optimizers_as_it_drives_adam(make):
    """With a schedule whose rate is constant, each new optimizer follows the same path as with that float."""
    paths = []
    for scheduled in (False, True):
        main, startup = Program(), Program()
        with program_guard(main, startup):
            w = layers.create_parameter([4], "float32", name="w")
            t = layers.data("t", [4], "float32")
            lr = layers.exponential_decay(0.05, decay_steps=10, decay_rate=1.0) if scheduled else 0.05
            make(lr).minimize(layers.reduce_sum(layers.square(w - t)))
        exe, scope = Executor(), Scope()
        exe.run(startup, scope=scope)
        scope.set("w", np.array([0.5, -1.0, 2.0, 0.0], np.float32))
        for _ in range(4):
            exe.run(main, feed={"t": np.arange(4, dtype=np.float32)}, scope=scope)
        assert scope["w"].dtype == np.float32
        paths.append(np.array(scope["w"]))
    np.testing.assert_allclose(paths[1], paths[0], rtol=1e-6)
    assert not np.allclose(paths[0], [0.5, -1.0, 2.0, 0.0])
