"""An Elman RNN as a ``while_loop``: read a noisy sine wave, predict its next value.

h_t = relu(x_t @ w_xh + h_{t-1} @ w_hh + b), for t < T with T fed at run time (PyTorch's
``nn.RNN(nonlinearity="relu")``);
prediction = h_T @ w_out; squared error; Adam. The loop's gradient is a
gradient while loop that walks the iterations in reverse (see
design_docs/control_flow.md).
"""
from __future__ import annotations

import numpy as np

from gradgen.program import Program, layers, program_guard
from gradgen.program.initializer import Normal

from ...optimizer import Adam
from .base import Example

BATCH, STEPS, HIDDEN = 32, 12, 16


def sine_windows(n: int = BATCH, steps: int = STEPS, seed: int = 0) -> dict[str, np.ndarray]:
    """``n`` windows of a sine wave with random phase and frequency, and the value that follows each."""
    rng = np.random.default_rng(seed)
    phase = rng.uniform(0, 2 * np.pi, (1, n, 1))
    freq = rng.uniform(0.3, 0.6, (1, n, 1))
    t = np.arange(steps + 1).reshape(-1, 1, 1)
    wave = np.sin(phase + freq * t) + rng.normal(0.0, 0.02, (steps + 1, n, 1))
    return {"seq": wave[:steps], "target": wave[steps], "T": np.array(steps, dtype=np.int64)}


def rnn(seed: int = 0) -> Example:
    """Build the network (float64; the time loop is one ``while`` op with its own sub-blocks)."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        seq = layers.data("seq", [-1, -1, 1], "float64")
        target = layers.data("target", [-1, 1], "float64")
        steps = layers.data("T", [], "int64")
        w_xh = layers.create_parameter([1, HIDDEN], "float64", name="w_xh", initializer=Normal(0.0, 0.5, seed=seed + 1))
        w_hh = layers.create_parameter([HIDDEN, HIDDEN], "float64", name="w_hh",
                                       initializer=Normal(0.0, 0.2, seed=seed + 2))
        b = layers.create_parameter([HIDDEN], "float64", name="b", initializer=Normal(0.0, 0.0, seed=seed + 3))
        w_out = layers.create_parameter([HIDDEN, 1], "float64", name="w_out", initializer=Normal(0.0, 0.3, seed=seed + 4))
        one = layers.fill_constant([], "int64", 1)
        h0 = layers.zeros_like(layers.matmul(layers.gather(seq, layers.fill_constant([], "int64", 0)), w_xh))

        def body(t, h):
            x_t = layers.gather(seq, t)
            return [layers.add(t, one), layers.relu(layers.matmul(x_t, w_xh) + layers.matmul(h, w_hh) + b)]

        _, h = layers.while_loop(lambda t, h: layers.less_than(t, steps), body,
                                 [layers.fill_constant([], "int64", 0), h0], max_iterations=1000)
        prediction = layers.matmul(h, w_out, name="prediction")
        loss = layers.reduce_mean(layers.square(prediction - target), name="loss")
    return Example("rnn", f"Elman RNN over a noisy sine wave as a while_loop, {STEPS} steps, hidden {HIDDEN}, "
                   "Adam lr 0.02 (float64)", main, startup, loss, sine_windows(seed=seed), 300,
                   lambda: Adam(0.02), [w_xh, w_hh, b, w_out])
