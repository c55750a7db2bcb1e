"""Data-parallel throughput on this machine: ``python -m tests.bench.data_parallel [--steps 20]``.

Trains an MLP (8 layers of 1024 x 1024, float32, mean squared error, SGD) on a
global batch of 256 rows with 1 and with 2 MPI ranks, each rank on its shard,
and prints samples per second and the share of a step each rank spends in
communication: blocked in ``allreduce_wait`` (not hidden by overlap) and
handing buckets to MPI (``allreduce_start``). BLAS runs one thread per
process so that 2 ranks do not oversubscribe the 2 cores; one more row runs
1 rank with 2 BLAS threads, the fair single-process baseline on 2 cores.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

from gradgen.framework import Executor, Scope, data_parallel, init_parallel, optimizer, shard_feed
from gradgen.program import Program, layers, program_guard
from gradgen.program.initializer import Normal

LAYERS, WIDTH, BATCH = 8, 1024, 256
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build(bucket_bytes: int):
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, WIDTH], "float32")
        y = layers.data("y", [-1, WIDTH], "float32")
        h = x
        for i in range(LAYERS):
            w = layers.create_parameter([WIDTH, WIDTH], "float32", name=f"w{i}", initializer=Normal(0.0, 0.03, seed=i))
            h = layers.relu(h @ w)
        loss = layers.mean(layers.square(h - y))
        optimizer.SGD(0.01).minimize(loss)
    buckets = data_parallel(main, startup, bucket_bytes=bucket_bytes)
    return main, startup, loss, buckets


def worker(steps: int, bucket_bytes: int) -> None:
    """One rank's measurement; rank 0 prints every rank's figures as one JSON line."""
    comm = init_parallel()
    main, startup, loss, buckets = build(bucket_bytes)
    rng = np.random.default_rng(0)
    feed = shard_feed({"x": rng.standard_normal((BATCH, WIDTH), dtype=np.float32),
                       "y": rng.standard_normal((BATCH, WIDTH), dtype=np.float32)}, comm)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    for _ in range(3):  # warm up: plans, buffers
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    comm.barrier()
    waited, started, times = comm.waited, comm.started, []
    for _ in range(steps):
        begin = time.perf_counter()
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
        times.append(time.perf_counter() - begin)
    mine = {"step_s": float(np.median(times)), "total_s": float(sum(times)), "waited_s": comm.waited - waited,
            "started_s": comm.started - started}
    everyone = comm.comm.gather(mine, root=0) if comm.size > 1 else [mine]
    if comm.rank == 0:
        print(json.dumps({"ranks": comm.size, "buckets": len(buckets), "per_rank": everyone}))


def measure(ranks: int, threads: int, steps: int, bucket_bytes: int) -> dict:
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    argv = [beside, "-n", str(ranks), sys.executable, "-m", "tests.bench.data_parallel", "--worker",
            "--steps", str(steps), "--bucket-mb", str(bucket_bytes / 2 ** 20)]
    result = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=600, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.data_parallel")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--bucket-mb", type=float, default=25.0)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    bucket_bytes = int(args.bucket_mb * 2 ** 20)
    if args.worker:
        worker(args.steps, bucket_bytes)
        return
    print(f"MLP {LAYERS} x {WIDTH}^2 float32, global batch {BATCH}, SGD, buckets of {args.bucket_mb:g} MiB, "
          f"{args.steps} timed steps (median)")
    print(f"{'ranks':>5} {'BLAS threads':>12} {'step ms':>8} {'samples/s':>10} {'waiting':>8} {'starting':>9}")
    for ranks, threads in ((1, 1), (1, 2), (2, 1)):
        row = measure(ranks, threads, args.steps, bucket_bytes)
        step = max(r["step_s"] for r in row["per_rank"])
        waiting = max(r["waited_s"] / r["total_s"] for r in row["per_rank"])
        starting = max(r["started_s"] / r["total_s"] for r in row["per_rank"])
        print(f"{ranks:>5} {threads:>12} {step * 1e3:>8.1f} {BATCH / step:>10.0f} {waiting:>8.1%} {starting:>9.1%}")


if __name__ == "__main__":
    main()
