"""Shared inputs for the recurrent-op tests: random weights in PyTorch's layout, and an independent numpy
reference of one direction (a plain step loop, no dual numbers, no fused input projection)."""
from __future__ import annotations

import numpy as np

from gradgen.program.ops.recurrent import GATES


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


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
              lens=None) -> dict[str, np.ndarray]:
    """Y and the final states of one direction, step by step in float64."""
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
                c[n] = sigmoid(f) * c[n] + sigmoid(i) * np.tanh(g)
                h[n] = sigmoid(o) * np.tanh(c[n])
            else:
                xa, ha = w @ xt + wb, r @ ht + rb
                rg = sigmoid(xa[:hidden] + ha[:hidden])
                z = sigmoid(xa[hidden:2 * hidden] + ha[hidden:2 * hidden])
                if linear_before_reset:
                    nn = np.tanh(xa[2 * hidden:] + rg * ha[2 * hidden:])
                else:
                    nn = np.tanh(xa[2 * hidden:] + r[2 * hidden:] @ (rg * ht) + rb[2 * hidden:])
                h[n] = (1 - z) * nn + z * ht
            y[t, n] = h[n]
    out = {"Y": y, "H": h}
    if cell == "lstm":
        out["C"] = c
    return {k: v.astype(ins["X"].dtype) for k, v in out.items()}
