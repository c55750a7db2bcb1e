"""A small regression model with dropout and batch norm, trained one SGD step: what the inference tests prune."""
from __future__ import annotations

import numpy as np

from gradgen.framework import Executor, Scope, optimizer
from gradgen.program import Program, layers, program_guard


def trained_regression(steps: int = 1):
    """(main, startup, scope, names): main holds forward, backward and SGD ops; scope holds trained values."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [None, 3], "float64")
        y = layers.data("y", [None, 1], "float64")
        h = layers.dropout(layers.fc(input=x, size=4, act="tanh"), 0.5, seed=1)
        h = layers.batch_norm(layers.reshape(h, [-1, 4, 1]))
        pred = layers.fc(input=layers.reshape(h, [-1, 4]), size=1)
        loss = layers.mean(layers.square_error_cost(input=pred, label=y))
        test_program = main.clone(for_test=True)  # before the optimizer, as Paddle's book does
        optimizer.SGD(0.1).minimize(loss)
    scope, exe = Scope(), Executor()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((5, 3)), "y": rng.standard_normal((5, 1))}
    for _ in range(steps):
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    return main, startup, scope, {"x": x, "y": y, "pred": pred, "loss": loss, "feed": feed,
                                 "test_program": test_program}


def reference_prediction(scope, xs: np.ndarray) -> np.ndarray:
    """The prediction in inference mode, in numpy: dropout off, batch norm with running statistics."""
    h = np.tanh(xs @ scope["fc_0.w_0"] + scope["fc_0.b_0"])
    mean, var = scope["batch_norm_0.mean"], scope["batch_norm_0.variance"]
    h = (h - mean) / np.sqrt(var + 1e-5) * scope["batch_norm_0.scale"] + scope["batch_norm_0.bias"]
    return h @ scope["fc_1.w_0"] + scope["fc_1.b_0"]
