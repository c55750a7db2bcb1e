"""The classic two-layer network from "Learning PyTorch with examples", as a gradgen program.

N, D_in, H, D_out = 64, 1000, 100, 10; y_pred = relu(x @ w1) @ w2;
loss = sum((y_pred - y)^2); SGD with learning rate 1e-6, float64.
"""
from __future__ import annotations

import numpy as np

from gradgen.program import Program, layers, program_guard
from gradgen.program.initializer import Normal

from ...optimizer import SGD
from .base import Example

N, D_IN, H, D_OUT = 64, 1000, 100, 10
LEARNING_RATE = 1e-6


def mlp_data(seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs and targets, as in the tutorial (fixed seed)."""
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((N, D_IN)), "y": rng.standard_normal((N, D_OUT))}


def mlp(seed: int = 0) -> Example:
    """Build the network; weights start as standard normal samples, as the tutorial's do."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, D_IN], "float64")
        y = layers.data("y", [-1, D_OUT], "float64")
        w1 = layers.create_parameter([D_IN, H], "float64", name="w1", initializer=Normal(0.0, 1.0, seed=seed + 1))
        w2 = layers.create_parameter([H, D_OUT], "float64", name="w2", initializer=Normal(0.0, 1.0, seed=seed + 2))
        y_pred = layers.matmul(layers.relu(layers.matmul(x, w1, name="h"), name="h_relu"), w2, name="y_pred")
        loss = layers.reduce_sum(layers.square(y_pred - y), name="loss")
    return Example("mlp", "two-layer ReLU network, 64 x 1000 -> 100 -> 10, squared error, SGD lr 1e-6 (float64)",
                   main, startup, loss, mlp_data(seed), 500, lambda: SGD(LEARNING_RATE), [w1, w2])
