"""``python -m tests.bench --compare``: gradgen, the numpy loop, PyTorch, JAX and PyTensor on the same steps.

Each system runs in a process of its own (``python -m tests.bench.compare SYSTEM CASE REPEATS`` prints its
median), the systems take turns in interleaved rounds, and the table shows the median over rounds. A system
that is not importable in the given interpreter is reported as such. None of them is a gradgen dependency.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

import numpy as np

SYSTEMS = ("gradgen", "numpy", "torch", "jax", "pytensor")
CASES = {"seed-f64": (64, 1000, 100, 10, "float64"), "seed-f32": (64, 1000, 100, 10, "float32"),
         "large-f32": (512, 4096, 4096, 1000, "float32")}
LR = 1e-6


def _data(n, d_in, h, d_out, dtype):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((n, d_in)).astype(dtype), rng.standard_normal((n, d_out)).astype(dtype),
            (rng.standard_normal((d_in, h)) * 0.01).astype(dtype),
            (rng.standard_normal((h, d_out)) * 0.01).astype(dtype))


def _gradgen(x, y, w1, w2):
    from .cases import _mlp_step

    step, _, _, _ = _mlp_step(x.shape[0], x.shape[1], w1.shape[1], y.shape[1], x.dtype.name, LR)
    return step


def _numpy(x, y, w1, w2):
    def step():
        hidden = x @ w1
        h_relu = np.maximum(hidden, 0)
        diff = h_relu @ w2 - y
        loss = float(np.square(diff).sum())
        g = 2.0 * diff
        gw2 = h_relu.T @ g
        gh = g @ w2.T
        gh[hidden < 0] = 0
        w1[...] -= LR * (x.T @ gh)
        w2[...] -= LR * gw2
        return loss
    return step


def _torch(x, y, w1, w2):
    import torch

    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    p1, p2 = torch.from_numpy(w1).requires_grad_(), torch.from_numpy(w2).requires_grad_()

    def step():
        loss = ((torch.relu(xt @ p1) @ p2 - yt) ** 2).sum()
        loss.backward()
        with torch.no_grad():
            for p in (p1, p2):
                p.sub_(LR * p.grad)
                p.grad = None
        return loss.item()
    return step


def _jax(x, y, w1, w2):
    import jax
    if x.dtype == np.float64:
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    def loss_fn(ws, xb, yb):
        return jnp.sum((jnp.maximum(xb @ ws[0], 0) @ ws[1] - yb) ** 2)

    @jax.jit
    def update(ws, xb, yb):
        loss, grads = jax.value_and_grad(loss_fn)(ws, xb, yb)
        return [w - LR * g for w, g in zip(ws, grads)], loss

    state = {"ws": [jnp.asarray(w1), jnp.asarray(w2)]}
    xj, yj = jnp.asarray(x), jnp.asarray(y)

    def step():
        state["ws"], loss = update(state["ws"], xj, yj)
        return float(loss)
    return step


def _pytensor(x, y, w1, w2):
    import pytensor
    import pytensor.tensor as pt

    xs, ys = pt.matrix("x", dtype=x.dtype.name), pt.matrix("y", dtype=x.dtype.name)
    s1, s2 = pytensor.shared(w1, "w1"), pytensor.shared(w2, "w2")
    loss = pt.sum(pt.sqr(pt.dot(pt.maximum(pt.dot(xs, s1), 0), s2) - ys))
    g1, g2 = pytensor.grad(loss, [s1, s2])
    lr = np.asarray(LR, x.dtype)
    fn = pytensor.function([xs, ys], loss, updates=[(s1, s1 - lr * g1), (s2, s2 - lr * g2)])
    return lambda: float(fn(x, y))


MAKERS = {"gradgen": _gradgen, "numpy": _numpy, "torch": _torch, "jax": _jax, "pytensor": _pytensor}


def worker(system: str, case: str, repeats: int) -> dict:
    """Time ``repeats`` steps of ``case`` on ``system`` in this process; the median in seconds."""
    try:
        step = MAKERS[system](*_data(*CASES[case]))
    except ImportError as e:
        return {"system": system, "case": case, "missing": str(e)}
    for _ in range(3):
        step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return {"system": system, "case": case, "median_s": statistics.median(times)}


def compare_main(python: str, quick: bool = False) -> None:
    """Interleaved rounds of every system on every case, each in its own process: gradgen and numpy in this
    interpreter, the others in ``python`` (an environment that has them, e.g. the anchors harness's)."""
    rounds, cases = (2, ("seed-f64", "seed-f32")) if quick else (5, tuple(CASES))
    results: dict[tuple[str, str], list[float]] = {}
    missing: dict[str, str] = {}
    for _ in range(rounds):
        for case in cases:
            for system in SYSTEMS:
                if system in missing:
                    continue
                reps = 5 if case.startswith("large") else 101
                exe = sys.executable if system in ("gradgen", "numpy") else python
                out = subprocess.run([exe, "-m", "tests.bench.compare", system, case, str(reps)],
                                     capture_output=True, text=True)
                lines = out.stdout.strip().splitlines()
                if out.returncode != 0 or not lines:
                    missing[system] = (out.stderr.strip().splitlines() or ["failed"])[-1]
                    continue
                row = json.loads(lines[-1])
                if "missing" in row:
                    missing[system] = row["missing"]
                    continue
                results.setdefault((case, system), []).append(row["median_s"])
    print(f"{'case':<12}" + "".join(f"{s:>12}" for s in SYSTEMS)
          + "   (ms, median over rounds; each in its own process)")
    for case in cases:
        cells = []
        for system in SYSTEMS:
            ts = results.get((case, system))
            cells.append(f"{statistics.median(ts) * 1e3:12.3f}" if ts else f"{'-':>12}")
        print(f"{case:<12}" + "".join(cells))
    for system, why in missing.items():
        print(f"{system}: not run ({why})")


if __name__ == "__main__":
    print(json.dumps(worker(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
