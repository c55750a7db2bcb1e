"""What compiling the seed MLP's whole step would reach: the bound on the issue's seed-MLP figure.

    python -m tests.bench.whole_step_bound                      # float32, 3 turns of each system
    python -m tests.bench.whole_step_bound --dtype float64 --turns 5

The seed MLP (the anchors' ``mlp_step.py`` at size ``seed``: [64, 1000] x [1000, 100] x [100, 10], sum of
squares, SGD) built with gradgen's layers and ``append_backward``, then timed four ways, each in a process of its
own (in one process the torch and OpenBLAS thread pools slow each other's runs), in turns, medians:

- ``compiled``: the program's 17 ops, each by its own ``compute`` over torch (the torch engine's derived kernels;
  the products ``torch.matmul``, each with the finiteness flag an engine would need to take ATen's product), traced
  into one function and compiled by inductor (``torch.compile(fullgraph=True)``: its C++ loops fuse the elementwise
  ops, the products stay ATen's), fed back its new weights each step as a run would commit them;
- ``default``: ``Executor()``, what the anchors time as ``gradgen``;
- ``loop``: the anchors' hand-written numpy step;
- ``products``: the step's five products alone, into arrays made once (the floor of any engine on numpy's BLAS).

PyTensor's C backend, the figure's peer, is the anchors' (``run.sh -s pytensor_c seed-f32``); it is not imported
here. Needs torch (the ``oracle`` extra) and a C++ compiler for inductor; a measuring aid, not a gradgen engine.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Callable

import numpy as np

__all__ = ["main"]

SYSTEMS = ("compiled", "default", "loop", "products")
SIZES = (64, 1000, 100, 10)
LR = 1e-6


def _data(dtype: str) -> tuple[np.ndarray, ...]:
    """x, y, w1, w2 as the anchors draw them (``mlp_step.make_data``, size seed)."""
    n, d_in, h, d_out = SIZES
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, d_in)).astype(dtype)
    y = rng.standard_normal((n, d_out)).astype(dtype)
    return x, y, rng.standard_normal((d_in, h)).astype(dtype), rng.standard_normal((h, d_out)).astype(dtype)


def _program(dtype: str):
    from gradgen.framework import append_backward, optimizer
    from gradgen.program import Program, layers, program_guard
    n, d_in, h, d_out = SIZES
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", shape=[-1, d_in], dtype=dtype)
        y = layers.data("y", shape=[-1, d_out], dtype=dtype)
        w1 = layers.create_parameter([d_in, h], dtype, name="w1")
        w2 = layers.create_parameter([h, d_out], dtype, name="w2")
        loss = layers.reduce_sum(layers.square(layers.relu(x @ w1) @ w2 - y))
        optimizer.SGD(learning_rate=LR).apply_gradients(append_backward(loss))
    return main, startup, loss


def _executor_step(dtype: str) -> Callable[[], object]:
    from gradgen.framework import Executor, Scope
    main, startup, loss = _program(dtype)
    x, y, w1, w2 = _data(dtype)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    scope.set("w1", w1)
    scope.set("w2", w2)
    return lambda: exe.run(main, feed={"x": x, "y": y}, fetch_list=[loss], scope=scope)


def _compiled_step(dtype: str) -> Callable[[], object]:
    """The program's ops as one inductor-compiled function of its feeds and persistables."""
    import torch
    from gradgen.framework import Executor, Scope
    from gradgen.framework.backend.torch.kernels import XP
    from gradgen.framework.backend.torch.kernels.derived import computed_kernel
    from gradgen.program.ops import OP_SCHEMAS

    main, startup, loss = _program(dtype)
    block = main.global_block()
    scope = Scope()
    Executor(backend="numpy").run(startup, scope=scope)
    flags: list = []

    def product(op):
        tx, ty = op.attr("transpose_x"), op.attr("transpose_y")

        def run(a, b):
            out = torch.matmul(a.mT if tx else a, b.mT if ty else b)
            flags.append(torch.isfinite(out).all())  # ATen's product is right only where no operand was inf or NaN
            return out
        return run

    steps = [(product(op) if op.type == "matmul" else computed_kernel(OP_SCHEMAS[op.type], XP)(op),
              tuple(op.input_arg_names), tuple(op.output_arg_names)) for op in block.ops]
    persistable = sorted({n for op in block.ops for n in op.input_arg_names if block.var(n).persistable})
    written = [n for n in persistable if any(n in op.output_arg_names for op in block.ops)]
    inputs, loss_name = ["x", "y", *persistable], loss.name  # (dynamo traces no method of a gradgen Variable)

    def whole(*values):
        env = dict(zip(inputs, values))
        flags.clear()
        for fn, ins, outs in steps:
            result = fn(*[env[n] for n in ins])
            env.update(zip(outs, (result,) if len(outs) == 1 else result))
        return (env[loss_name], *[env[n] for n in written], torch.stack(flags).all())

    compiled = torch.compile(whole, fullgraph=True, dynamic=False)
    x, y, w1, w2 = _data(dtype)
    state = {"w1": w1, "w2": w2, **{n: np.asarray(scope[n]) for n in persistable if n not in ("w1", "w2")}}

    def step():
        with torch.inference_mode():
            *values, ok = compiled(*(torch.from_numpy(a) for a in (x, y, *(state[n] for n in persistable))))
        if not bool(ok):
            raise RuntimeError("a product met inf or NaN: an engine would run this step eagerly")
        state.update(zip(written, (v.numpy() for v in values[1:])))
        return float(values[0])

    return step


def _loop_step(dtype: str) -> Callable[[], object]:
    x, y, w1, w2 = _data(dtype)

    def step():
        nonlocal w1, w2
        h = x @ w1
        h_relu = np.maximum(h, 0)
        d = h_relu @ w2 - y
        grad_y = 2.0 * d
        grad_w2 = h_relu.T @ grad_y
        grad_h = grad_y @ w2.T
        grad_h[h < 0] = 0
        w1 = w1 - LR * (x.T @ grad_h)
        w2 = w2 - LR * grad_w2
        return float(np.square(d).sum())

    return step


def _products_step(dtype: str) -> Callable[[], object]:
    x, _, w1, w2 = _data(dtype)
    n, d_in, h, d_out = SIZES
    outs = [np.empty(s, dtype) for s in ((n, h), (n, d_out), (h, d_out), (n, h), (d_in, h))]
    g = np.ones((n, d_out), dtype)

    def step():
        np.matmul(x, w1, out=outs[0])
        np.matmul(outs[0], w2, out=outs[1])
        np.matmul(outs[0].T, g, out=outs[2])
        np.matmul(g, w2.T, out=outs[3])
        np.matmul(x.T, outs[3], out=outs[4])

    return step


MAKERS = {"compiled": _compiled_step, "default": _executor_step, "loop": _loop_step, "products": _products_step}


def _time_one(system: str, dtype: str, seconds: float) -> None:
    """In this process: ``system``'s step, warmed, then 0.25 s blocks for ``seconds``; prints the median us."""
    step = MAKERS[system](dtype)
    start = time.perf_counter()
    step()
    first = time.perf_counter() - start
    warm_until = time.perf_counter() + 3.0  # past a default's trial of its remembered choice
    while time.perf_counter() < warm_until:
        step()
    blocks, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end:
        runs, block_start = 0, time.perf_counter()
        while time.perf_counter() - block_start < 0.25:
            step()
            runs += 1
        blocks.append((time.perf_counter() - block_start) / runs * 1e6)
    print(json.dumps({"system": system, "us": statistics.median(blocks), "first_s": first}), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--turns", type=int, default=3, help="processes per system, in turns")
    parser.add_argument("--seconds", type=float, default=4.0, help="timed seconds per process")
    parser.add_argument("--one", choices=SYSTEMS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        _time_one(args.one, args.dtype, args.seconds)
        return
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENBLAS_")}  # as the anchors' run.sh
    times: dict[str, list[float]] = {s: [] for s in SYSTEMS}
    for _ in range(args.turns):
        for system in SYSTEMS:
            out = subprocess.run([sys.executable, "-m", "tests.bench.whole_step_bound", "--one", system, "--dtype",
                                  args.dtype, "--seconds", str(args.seconds)], env=env, capture_output=True,
                                 text=True, check=True).stdout
            times[system].append(json.loads(out.strip().splitlines()[-1])["us"])
    medians = {s: statistics.median(v) for s, v in times.items()}
    print(f"seed MLP {args.dtype}, load {os.getloadavg()[0]:.2f}, us per step (median of {args.turns} processes): "
          + ", ".join(f"{s} {m:.1f}" for s, m in medians.items()))


if __name__ == "__main__":
    main()
