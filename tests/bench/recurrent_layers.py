"""A fused recurrent layer's training step (``layers.lstm`` or ``layers.gru``, one layer, time-major, mean of the
squared outputs, SGD) on the default ``Executor()`` and on each engine, beside PyTorch's ``nn.LSTM`` / ``nn.GRU``
of the same sizes (what a PyTorch user writes), in one process, in turns, medians (design_docs/performance.md,
*Recurrent layers*).

    python -m tests.bench.recurrent_layers                      # LSTM, 50 steps, batch 32, 64 inputs, hidden 128
    python -m tests.bench.recurrent_layers --cell gru --steps 100 --hidden 256
    python -m tests.bench.recurrent_layers --cell gru --dtype float64

The default executor runs untimed for ``--settle`` seconds first, so that its trial has chosen (the choice and why
are printed); every step then runs ``--warm`` times untimed and ``--rounds`` blocks of ``--block`` steps, in turns,
each block after a 0.2 s pause (an engine's block right after xla's ran up to 1.6x slower: XLA's threads spin on).
Both sides start from their own initial weights: the losses are not compared here (``tests/backends`` compares the
engines' numbers; PyTorch's layout is the op's own).
"""
from __future__ import annotations

import argparse
import os
import time
from typing import Callable

import numpy as np

from .cases import block_medians

__all__ = ["gradgen_step", "main", "pytorch_step"]


def gradgen_step(cell: str, x: np.ndarray, hidden: int,
                 backend: str | None) -> tuple[Callable[[], object], Callable[[], object]]:
    """A training step of ``cell`` over ``x`` on ``backend`` (None: the default executor), and what tells the
    executor's choice of engine for it (``Executor.backend_choice``)."""
    from gradgen.framework import Executor, Scope, optimizer
    from gradgen.program import Program, layers, program_guard

    main, startup = Program(), Program()
    with program_guard(main, startup):
        xv = layers.data("x", [x.shape[0], -1, x.shape[2]], str(x.dtype))
        out, _ = getattr(layers, cell)(xv, hidden)
        loss = layers.reduce_mean(layers.square(out))
        optimizer.SGD(0.01).minimize(loss)
    exe, scope = Executor(backend=backend), Scope()
    exe.run(startup, scope=scope)
    return (lambda: exe.run(main, feed={"x": x}, fetch_list=[loss], scope=scope)), (lambda: exe.backend_choice(main))


def pytorch_step(cell: str, x: np.ndarray, hidden: int) -> Callable[[], object]:
    """PyTorch's training step of the same layer: forward, backward, SGD."""
    import torch

    layer = (torch.nn.LSTM if cell == "lstm" else torch.nn.GRU)(x.shape[2], hidden, dtype=getattr(torch, str(x.dtype)))
    sgd = torch.optim.SGD(layer.parameters(), lr=0.01)
    inputs = torch.from_numpy(x)

    def step():
        sgd.zero_grad()
        out, _ = layer(inputs)
        loss = (out * out).mean()
        loss.backward()
        sgd.step()
        return loss.item()

    return step


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cell", choices=["lstm", "gru"], default="lstm")
    parser.add_argument("--steps", type=int, default=50, help="sequence length")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--inputs", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--engines", default="numpy,xla,torch", help="gradgen engines timed beside the default")
    parser.add_argument("--settle", type=float, default=20.0, help="seconds of the default's runs before timing")
    parser.add_argument("--warm", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--block", type=int, default=5)
    args = parser.parse_args(argv)
    x = np.random.default_rng(0).standard_normal((args.steps, args.batch, args.inputs)).astype(args.dtype)
    default, chosen = gradgen_step(args.cell, x, args.hidden, None)
    began = time.perf_counter()
    while time.perf_counter() - began < args.settle:
        default()
    steps = {"gradgen": default}
    for engine in filter(None, args.engines.split(",")):
        try:
            steps[f"gradgen@{engine}"] = gradgen_step(args.cell, x, args.hidden, engine)[0]
            steps[f"gradgen@{engine}"]()
        except Exception as e:  # an engine that cannot run the layer (not installed, unknown): said, not timed
            print(f"gradgen@{engine}: {type(e).__name__}: {str(e).splitlines()[0]}")
            steps.pop(f"gradgen@{engine}", None)
    steps["pytorch"] = pytorch_step(args.cell, x, args.hidden)
    medians = block_medians(steps, args.rounds, args.block, args.warm, settle=0.2)
    print(f"{args.cell}, {args.steps} steps, batch {args.batch}, {args.inputs} inputs, hidden {args.hidden}, "
          f"{args.dtype}, load {os.getloadavg()[0]:.2f}; the default chose {chosen()}")
    print("| system | ms a step | / PyTorch |\n|---|---:|---:|")
    for name, ms in medians.items():
        print(f"| {name} | {ms:.2f} | {ms / medians['pytorch']:.2f} |")


if __name__ == "__main__":
    main()
