"""The four workloads written in plain JAX: the loss as a function of the parameters, one jitted training step.

``jax_step(workload, device)`` returns a function that runs one step (value and gradient, then SGD or Adam, all
in one ``jax.jit`` with the old parameters donated) on ``device`` and gives the loss as a float. Products and
convolutions run in full float32 (``jax_default_matmul_precision = "highest"``), as gradgen's XLA lowerings ask
for, so on a GPU neither side takes TF32's shortcut.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .workloads import DTYPE, RNN, TRANSFORMER, Workload

__all__ = ["jax_step"]


def _losses(jax, jnp, lax):
    """Workload name -> ``loss(params, running, x, y) -> (loss, new running statistics)``."""
    def cross_entropy(logits, labels):
        log_p = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.take_along_axis(log_p, labels[:, None], axis=1))

    def conv(h, w, padding):
        return lax.conv_general_dilated(h, w, (1, 1), padding, dimension_numbers=("NCHW", "OIHW", "NCHW"))

    def channel(v):
        return v[None, :, None, None]

    def lenet(p, running, x, y):
        def conv_relu_pool(h, name):
            h = jax.nn.relu(conv(h, p[f"{name}.w"], "VALID") + channel(p[f"{name}.b"]))
            return lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

        h = conv_relu_pool(conv_relu_pool(x, "c1"), "c2").reshape(x.shape[0], 256)
        h = jax.nn.relu(h @ p["f1.w"] + p["f1.b"])
        h = jax.nn.relu(h @ p["f2.w"] + p["f2.b"])
        return cross_entropy(h @ p["f3.w"] + p["f3.b"], y), running

    def resnet(p, running, x, y):
        new = {}

        def conv_bn(h, k):
            h = conv(h, p[f"conv{k}.w"], ((1, 1), (1, 1)))
            mean = jnp.mean(h, axis=(0, 2, 3))
            var = jnp.mean(jnp.square(h - channel(mean)), axis=(0, 2, 3))
            new[f"mean{k}"] = 0.9 * running[f"mean{k}"] + 0.1 * mean
            new[f"var{k}"] = 0.9 * running[f"var{k}"] + 0.1 * var
            normed = (h - channel(mean)) / jnp.sqrt(channel(var) + 1e-5)
            return normed * channel(p[f"bn{k}.scale"]) + channel(p[f"bn{k}.bias"])

        h = x
        for block in range(2):
            inner = jax.nn.relu(conv_bn(h, 2 * block))
            h = jax.nn.relu(conv_bn(inner, 2 * block + 1) + h)
        return cross_entropy(jnp.mean(h, axis=(2, 3)) @ p["fc.w"] + p["fc.b"], y), new

    def transformer(p, running, x, y):
        batch, seq, width, heads = x.shape[0], TRANSFORMER["seq"], TRANSFORMER["width"], TRANSFORMER["heads"]
        per_head = width // heads

        def layer_norm(t, name):
            centred = t - jnp.mean(t, axis=-1, keepdims=True)
            var = jnp.mean(centred * centred, axis=-1, keepdims=True)
            return centred * lax.rsqrt(var + 1e-5) * p[f"{name}.scale"] + p[f"{name}.bias"]

        def dense(t, name):
            return t @ p[f"{name}.w"] + p[f"{name}.b"]

        def split_heads(t):
            return t.reshape(batch, seq, heads, per_head).transpose(0, 2, 1, 3)

        h = layer_norm(x, "ln1")
        q, k, v = (split_heads(dense(h, name)) for name in ("q", "k", "v"))
        weights = jax.nn.softmax((q @ k.transpose(0, 1, 3, 2)) / np.sqrt(per_head), axis=-1)
        x1 = x + dense((weights @ v).transpose(0, 2, 1, 3).reshape(batch, seq, width), "o")
        out = x1 + dense(jax.nn.gelu(dense(layer_norm(x1, "ln2"), "ff1"), approximate=False), "ff2")
        return jnp.mean(jnp.square(out - y)), running

    def rnn(p, running, x, y):
        def cell(h, x_t):
            return jnp.tanh(x_t @ p["w_xh"] + h @ p["w_hh"] + p["b"]), None

        last, _ = lax.scan(cell, jnp.zeros((x.shape[1], RNN["width"]), DTYPE), x)
        return jnp.mean(jnp.square(last @ p["w_out"] - y)), running

    return {"lenet": lenet, "resnet": resnet, "transformer": transformer, "rnn": rnn}


def jax_step(wl: Workload, device) -> Callable[[], float]:
    """One jitted training step of ``wl`` on the jax ``device``, from the workload's parameters."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    jax.config.update("jax_default_matmul_precision", "highest")
    loss_fn = _losses(jax, jnp, lax)[wl.name]
    lr = wl.learning_rate

    def put(tree):
        return jax.device_put(tree, device)

    params = put({k: v.copy() for k, v in wl.params.items()})
    running = put({f"{s}{k}": np.full(64, 1.0 if s == "var" else 0.0, DTYPE) for s in ("mean", "var") for k in
                   range(4)} if wl.name == "resnet" else {})
    x, y = put(wl.x), put(wl.y)

    def sgd(p, grads, state):
        return {k: p[k] - lr * grads[k] for k in p}, state

    def adam(p, grads, state):
        b1, b2, eps = 0.9, 0.999, 1e-8
        t = state["t"] + 1
        m = {k: b1 * state["m"][k] + (1 - b1) * grads[k] for k in p}
        v = {k: b2 * state["v"][k] + (1 - b2) * grads[k] * grads[k] for k in p}
        step_size, root_correction = lr / (1 - b1 ** t), jnp.sqrt(1 - b2 ** t)  # torch.optim.Adam's formula
        new_p = {k: p[k] - step_size * m[k] / (jnp.sqrt(v[k]) / root_correction + eps) for k in p}
        return new_p, {"t": t, "m": m, "v": v}

    update = adam if wl.optimizer == "adam" else sgd
    zeros = {k: np.zeros_like(v) for k, v in wl.params.items()}
    opt_state = put({"t": np.zeros((), DTYPE), "m": zeros, "v": zeros} if wl.optimizer == "adam" else {})

    def train(p, running, state, x, y):
        (loss, new_running), grads = jax.value_and_grad(loss_fn, has_aux=True)(p, running, x, y)
        new_p, new_state = update(p, grads, state)
        return new_p, new_running, new_state, loss

    compiled = jax.jit(train, donate_argnums=(0, 1, 2))
    held = {"p": params, "running": running, "state": opt_state}

    def step() -> float:
        held["p"], held["running"], held["state"], loss = compiled(held["p"], held["running"], held["state"], x, y)
        return float(loss)

    return step
