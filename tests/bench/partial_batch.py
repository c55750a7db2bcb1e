"""A training run whose last batch is partial, on each engine: compiles and total time against the same run
with equal batches (issue 32, "Shapes that change don't recompile each step").

    python -m tests.bench.partial_batch                 # numpy, xla and the default Executor(), 5 epochs
    python -m tests.bench.partial_batch --epochs 3 --engines auto,xla

The model is a small digits classifier (8 x 8 images as scikit-learn's digits set, 10 classes: conv 8 3x3,
relu, 2x2 max pool, fc 64, relu, fc 10, softmax cross-entropy, Adam), on synthetic data of that set's size:
1,797 samples in batches of 64 (28 full batches and one of 5) against 1,792 (28 full batches). Each engine runs
in a process of its own with an empty XLA compile cache (``GRADGEN_CACHE_DIR`` a fresh folder), so every
compile is paid; the two runs alternate ``--repeats`` times and the table gives medians. Time with
``OPENBLAS_CORETYPE`` unset, as the anchors' ``run.sh`` does.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

__all__ = ["main", "train"]

BATCH, SIDE, CLASSES = 64, 8, 10


def train(engine: str, samples: int, epochs: int) -> dict:
    """Train on ``engine`` ("auto" is the default ``Executor()``); returns the seconds, compiles and last loss."""
    import numpy as np

    from gradgen.framework import Executor, Scope, optimizer
    from gradgen.program import Program, layers, program_guard

    rng = np.random.default_rng(0)
    images = rng.standard_normal((samples, 1, SIDE, SIDE)).astype(np.float32)
    labels = rng.integers(0, CLASSES, (samples, 1))
    main_program, startup = Program(), Program()
    startup.random_seed = 1
    with program_guard(main_program, startup):
        x = layers.data("image", [-1, 1, SIDE, SIDE], "float32")
        y = layers.data("label", [-1, 1], "int64")
        h = layers.pool2d(layers.conv2d(x, 8, 3, padding=1, act="relu"), 2, "max")
        h = layers.reshape(h, [-1, 8 * (SIDE // 2) ** 2])
        h = layers.fc(layers.fc(h, 64, act="relu"), CLASSES)
        loss = layers.reduce_mean(layers.softmax_with_cross_entropy(h, y))
        optimizer.Adam(0.01).minimize(loss)
    exe, scope = Executor(backend=None if engine == "auto" else engine), Scope()
    exe.run(startup, scope=scope)
    before = exe.plans_built
    start = time.perf_counter()
    last = None
    for _ in range(epochs):
        for first in range(0, samples, BATCH):
            feed = {"image": images[first:first + BATCH], "label": labels[first:first + BATCH]}
            (last,) = exe.run(main_program, feed=feed, fetch_list=[loss], scope=scope)
    seconds = time.perf_counter() - start
    choice = exe.backend_choice(main_program)
    return {"seconds": seconds, "builds": exe.plans_built - before, "loss": float(last),
            "choice": choice[0] if choice else None}


def _in_own_process(engine: str, samples: int, epochs: int, numpy_first: float | None = None) -> dict:
    """``train`` in a fresh process; adds ``process_seconds``, the whole process's wall time (it includes the
    import and an exit that waits for a background compile still running)."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "GRADGEN_CACHE_DIR": cache}
        env.pop("GRADGEN_BACKEND", None)
        setting = ("" if numpy_first is None else
                   f"import gradgen.framework.runtime.trial_rules as a; a.NUMPY_SECONDS_FIRST = {numpy_first!r}; ")
        code = (f"import json; {setting}from tests.bench.partial_batch import train; "
                f"print(json.dumps(train({engine!r}, {samples}, {epochs})))")
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600,
                              cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    if done.returncode:
        raise RuntimeError(done.stderr)
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "process_seconds": time.perf_counter() - start}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--engines", default="numpy,xla,auto")
    parser.add_argument("--repeats", type=int, default=3,
                        help="pairs of processes per engine, equal and partial in turns; the table gives medians "
                             "(one process against another differs by 10-15%% on a 2-core machine)")
    parser.add_argument("--numpy-first", type=float, default=None,
                        help="the trial's NUMPY_SECONDS_FIRST in the child processes (to weigh a setting)")
    args = parser.parse_args(argv)
    print("| engine | equal batches (s) | partial last batch (s) | ratio | plans/compiles built (partial, most) "
          "| choice | process, partial (s) |")
    print("|---|---:|---:|---:|---:|---|---:|")
    for engine in args.engines.split(","):
        pairs = [(_in_own_process(engine, 28 * BATCH, args.epochs, args.numpy_first),
                  _in_own_process(engine, 28 * BATCH + 5, args.epochs, args.numpy_first)) for _ in range(args.repeats)]
        equal, partial = (statistics.median(p[k]["seconds"] for p in pairs) for k in (0, 1))
        builds = max(p[1]["builds"] for p in pairs)
        choices = "/".join(sorted({p[1]["choice"] or "" for p in pairs}))
        process = statistics.median(p[1]["process_seconds"] for p in pairs)
        print(f"| {engine} | {equal:.2f} | {partial:.2f} | {partial / equal:.2f} | {builds} | {choices} | "
              f"{process:.2f} |", flush=True)


if __name__ == "__main__":
    main()
