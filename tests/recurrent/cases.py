"""Shared inputs for the recurrent-op tests: random weights in PyTorch's layout, and an independent numpy
reference of one direction (a plain step loop, no dual numbers, no fused input projection)."""
from __future__ import annotations

import numpy as np

from gradgen.program.ops.recurrent import GATES


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


ACTIVATION_FUNCTIONS = {
    "sigmoid": lambda x, a, b: sigmoid(x), "tanh": lambda x, a, b: np.tanh(x), "relu": lambda x, a, b: np.maximum(x, 0),
    "affine": lambda x, a, b: a * x + b, "leakyrelu": lambda x, a, b: np.where(x >= 0, x, a * x),
    "thresholdedrelu": lambda x, a, b: np.where(x >= a, x, 0.0), "scaledtanh": lambda x, a, b: a * np.tanh(b * x),
    "hardsigmoid": lambda x, a, b: np.minimum(np.maximum(a * x + b, 0), 1),
    "elu": lambda x, a, b: np.where(x >= 0, x, a * (np.exp(np.minimum(x, 0)) - 1)),
    "softsign": lambda x, a, b: x / (1 + np.abs(x)), "softplus": lambda x, a, b: np.log1p(np.exp(x)),
}
"""ONNX's activation formulas (Operators.md, LSTM), written out independently of the kernels."""

LSTM_ACTIVATIONS = [  # (names, alphas, betas): every activation of ONNX at least once over both cells
    (["hardsigmoid", "softsign", "elu"], [0.3, 0.0, 0.8], [0.45, 0.0, 0.0]),
    (["softplus", "scaledtanh", "leakyrelu"], [0.0, 1.5, 0.05], [0.0, 0.7, 0.0]),
    (["sigmoid", "affine", "relu"], [0.0, 0.7, 0.0], [0.0, 0.1, 0.0]),
]
GRU_ACTIVATIONS = [
    (["hardsigmoid", "elu"], [0.25, 1.3], [0.5, 0.0]),
    (["sigmoid", "thresholdedrelu"], [0.0, 0.3], [0.0, 0.0]),
    (["softsign", "affine"], [0.0, 0.6], [0.0, -0.2]),
    (["softplus", "relu"], [], []),
]


def activation_attrs(names, alphas, betas) -> dict:
    return {"activations": names, "activation_alpha": alphas, "activation_beta": betas}


def inputs(cell: str, steps: int, batch: int, features: int, hidden: int, seed: int = 0, dtype="float64",
           bias: bool = True, initial: bool = True) -> dict[str, np.ndarray]:
    """X, W, R (and WB, RB, H0, C0 when asked) by slot, weights scaled so the gates are not saturated."""
    rng = np.random.default_rng(seed)
    g = GATES[cell] * hidden
    out = {"X": rng.standard_normal((steps, batch, features)), "W": rng.standard_normal((g, features)) * 0.6,
           "R": rng.standard_normal((g, hidden)) * 0.6}
    if bias:
        out.update(WB=rng.standard_normal(g) * 0.5, RB=rng.standard_normal(g) * 0.5)
    if initial:
        out["H0"] = rng.standard_normal((batch, hidden))
        if cell == "lstm":
            out["C0"] = rng.standard_normal((batch, hidden))
    return {k: v.astype(dtype) for k, v in out.items()}


def reference(cell: str, ins: dict, is_reverse: bool = False, linear_before_reset: bool = True,
              lens=None, acts=None) -> dict[str, np.ndarray]:
    """Y and the final states of one direction, step by step in float64; ``acts`` the activations as
    (name, alpha, beta), sigmoid and tanh when None."""
    acts = acts or [("sigmoid", 0, 0), ("tanh", 0, 0), ("tanh", 0, 0)]
    fa, ga, ha = (lambda x, n=n, a=a, b=b: ACTIVATION_FUNCTIONS[n](x, a, b) for n, a, b in (acts * 2)[:3])
    x, w, r = (ins[k].astype(np.float64) for k in ("X", "W", "R"))
    steps, batch, hidden = x.shape[0], x.shape[1], r.shape[1]
    zeros = np.zeros(r.shape[0])
    wb, rb = ins.get("WB", zeros).astype(np.float64), ins.get("RB", zeros).astype(np.float64)
    h = ins.get("H0", np.zeros((batch, hidden))).astype(np.float64).copy()
    c = ins.get("C0", np.zeros((batch, hidden))).astype(np.float64).copy()
    lens = np.full(batch, steps) if lens is None else np.asarray(lens)
    y = np.zeros((steps, batch, hidden))
    for n in range(batch):
        order = range(lens[n])[::-1] if is_reverse else range(lens[n])
        for t in order:
            xt, ht = x[t, n], h[n]
            if cell == "lstm":
                a = w @ xt + wb + r @ ht + rb
                i, f, g, o = (a[k * hidden:(k + 1) * hidden] for k in range(4))
                c[n] = fa(f) * c[n] + fa(i) * ga(g)
                h[n] = fa(o) * ha(c[n])
            else:
                xa, hp = w @ xt + wb, r @ ht + rb
                rg = fa(xa[:hidden] + hp[:hidden])
                z = fa(xa[hidden:2 * hidden] + hp[hidden:2 * hidden])
                if linear_before_reset:
                    nn = ga(xa[2 * hidden:] + rg * hp[2 * hidden:])
                else:
                    nn = ga(xa[2 * hidden:] + r[2 * hidden:] @ (rg * ht) + rb[2 * hidden:])
                h[n] = (1 - z) * nn + z * ht
            y[t, n] = h[n]
    out = {"Y": y, "H": h}
    if cell == "lstm":
        out["C"] = c
    return {k: v.astype(ins["X"].dtype) for k, v in out.items()}
