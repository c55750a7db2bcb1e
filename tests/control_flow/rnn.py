"""The RNN used by the loop tests: ``h = tanh(h @ w + x_t)`` over T steps, as a while_loop or unrolled."""
from __future__ import annotations

import numpy as np

from gradgen.framework import Executor, Scope, gradients
from gradgen.framework.tools.gradcheck import numeric_gradient
from gradgen.program import Program, layers, program_guard

B, H, T_MAX = 2, 3, 7


def rnn_step(h, w, x_t):
    return layers.tanh(layers.add(layers.matmul(h, w), x_t))


def build(unrolled_steps: int | None = None):
    """Loss and its gradients in w and h0; ``unrolled_steps`` None builds the while_loop version (T is fed)."""
    main = Program()
    with program_guard(main, Program()):
        xs = layers.data("xs", [-1, B, H], "float64")
        h0 = layers.data("h0", [B, H], "float64")
        w = layers.data("w", [H, H], "float64")
        c = layers.data("c", [B, H], "float64")
        if unrolled_steps is None:
            steps = layers.data("T", [], "int64")

            def body(t, h):
                return [layers.add(t, layers.fill_constant([], "int64", 1)), rnn_step(h, w, layers.gather(xs, t))]

            _, h = layers.while_loop(lambda t, h: layers.less_than(t, steps), body,
                                     [layers.fill_constant([], "int64", 0), h0])
        else:
            h = h0
            for t in range(unrolled_steps):
                h = rnn_step(h, w, layers.gather(xs, layers.fill_constant([], "int64", t)))
        loss = layers.reduce_sum(layers.multiply(layers.square(h), c))
        grads = gradients([loss], [w, h0])
    return main, loss, grads


def feed_for(steps: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {"xs": rng.standard_normal((steps, B, H)), "h0": rng.standard_normal((B, H)),
            "w": 0.5 * rng.standard_normal((H, H)), "c": rng.standard_normal((B, H)), "T": np.int64(steps)}


def run(main, fetch, feed) -> list:
    names = {v.name for v in main.global_block().vars.values()}
    return Executor(check_types=True).run(main, feed={k: v for k, v in feed.items() if k in names},
                                          fetch_list=fetch, scope=Scope())


def numeric(main, loss, feed, wrt: str) -> np.ndarray:
    names = {v.name for v in main.global_block().vars.values()}
    return numeric_gradient(main, {k: v for k, v in feed.items() if k in names}, Scope(), loss.name, wrt)
