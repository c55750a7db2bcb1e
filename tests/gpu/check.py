"""The GPU check's driver: each workload on each system in its own process, losses checked, a table of medians.

    python -m tests.gpu.check             # on the GPU (check.sh installs the engines' CUDA builds first)
    python -m tests.gpu.check --cpu       # the same runs on the CPU, fewer steps: the check's own test

For each workload it runs gradgen's numpy reference on the CPU for ``--check-steps`` steps, then gradgen's XLA
engine, plain JAX and PyTorch on the device for ``--warmup`` + ``--steps`` steps, each in a process of its own
under a timeout (so one hung engine costs its timeout, not the check). gradgen's first losses must equal the
reference's within float32 tolerance; JAX's and PyTorch's are shown beside them (same model, same data, same
initial weights, so a peer that drifts is not the same workload). It prints a markdown table of median ms per
training step and gradgen's ratios to each peer, and exits 1 when a gradgen run failed or its losses differ,
2 when the device has no GPU for jax or torch.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .one_run import NO_GPU
from .workloads import NAMES

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[2]
TITLES = {"lenet": "LeNet-5, batch 64", "resnet": "ResNet basic blocks, batch 32, 64 ch, 32x32",
          "transformer": "transformer block, batch 16, seq 128, d 256, Adam", "rnn": "tanh RNN in while_loop, T 50"}
PEERS = ("jax", "torch")


class Clock:
    """The check's time budget: each run gets its own timeout, cut to what the budget has left."""

    def __init__(self, budget_s: float, run_timeout_s: float):
        self.deadline, self.run_timeout_s = time.monotonic() + budget_s, run_timeout_s

    def next_timeout(self) -> float:
        return min(self.run_timeout_s, self.deadline - time.monotonic())


def _environment(cpu: bool) -> dict[str, str]:
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false", PYTHONUNBUFFERED="1")
    if cpu:
        env.update(JAX_PLATFORMS="cpu", CUDA_VISIBLE_DEVICES="")
    return env


def _child(args: list[str], cpu: bool, clock: Clock) -> tuple[dict | None, str]:
    """Runs ``python -m tests.gpu.one_run ARGS``: (its JSON, "") or (None, why it gave none)."""
    timeout = clock.next_timeout()
    if timeout < 5:
        return None, "skipped: the check's time budget is spent"
    command = [sys.executable, "-m", "tests.gpu.one_run", *args, "--device", "cpu" if cpu else "gpu"]
    try:
        done = subprocess.run(command, cwd=ROOT, env=_environment(cpu), capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:.0f} s"
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        message = tail[0][:300].replace("|", "/")  # a '|' would split the table's columns
        return None, ("no GPU: " if done.returncode == NO_GPU else "failed: ") + message
    return json.loads(done.stdout.strip().splitlines()[-1]), ""


def _worst_relative(losses: list[float], reference: list[float]) -> float:
    return max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(losses, reference))


def _ms(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _cell(result: dict | None, why: str) -> str:
    return _ms(statistics.median(result["ms"])) if result else f"({why})"


def _ratio(result: dict | None, peer: dict | None) -> str:
    if not (result and peer):
        return "-"
    ratio = statistics.median(result["ms"]) / statistics.median(peer["ms"])
    return f"{ratio:.2f}" if ratio >= 0.1 else f"{ratio:.2g}"


def _loss_cell(result: dict | None, reference: dict | None, rtol: float) -> tuple[str, bool]:
    """The run's worst relative difference from the reference's losses, and whether it is within ``rtol``."""
    if not (result and reference):
        return "-", False
    count = len(reference["losses"])
    worst = _worst_relative(result["losses"][:count], reference["losses"])
    return f"{'ok' if worst <= rtol else 'DIFFERS'} {worst:.1e}", worst <= rtol


def check(workloads: list[str], cpu: bool, steps: int, warmup: int, check_steps: int, rtol: float,
          clock: Clock) -> tuple[list[str], dict[str, str], bool]:
    """The table's lines, where each system ran, and whether every gradgen run ran and matched the reference."""
    where = "cpu" if cpu else "gpu"
    lines = [f"| workload | gradgen@xla-{where} | JAX jit | PyTorch | gradgen / JAX | gradgen / PyTorch "
             f"| gradgen loss vs CPU numpy ({check_steps} steps) | JAX, PyTorch loss vs CPU numpy |",
             "|---|---|---|---|---|---|---|---|"]
    passed, where_each = True, {}
    for name in workloads:
        reference, why_ref = _child(["reference", name, "--steps", str(check_steps), "--warmup", "0"], cpu, clock)
        runs = {}
        for system in ("gradgen", *PEERS):
            runs[system] = _child([system, name, "--steps", str(steps), "--warmup", str(warmup)], cpu, clock)
        (ours, why), peers = runs["gradgen"], {p: runs[p][0] for p in PEERS}
        for result in (reference, ours, *peers.values()):
            if result:
                where_each.setdefault(result["system"], result["where"])
        loss_text, matched = _loss_cell(ours, reference, rtol)
        if reference is None:
            loss_text = f"(reference {why_ref})"
        peer_losses = ", ".join(_loss_cell(peers[p], reference, rtol)[0] for p in PEERS)
        passed = passed and matched
        lines.append(f"| {TITLES[name]} | {_cell(ours, why)} | {_cell(*runs['jax'])} | {_cell(*runs['torch'])} "
                     f"| {_ratio(ours, peers['jax'])} | {_ratio(ours, peers['torch'])} | {loss_text} "
                     f"| {peer_losses} |")
        print(lines[-1], file=sys.stderr, flush=True)  # progress, in case the whole check is cut short
    return lines, where_each, passed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.gpu.check", description=__doc__.split("\n")[0])
    parser.add_argument("--cpu", action="store_true", help="run everything on the CPU, fewer steps")
    parser.add_argument("--workloads", default=",".join(NAMES), help=f"comma-separated, of {', '.join(NAMES)}")
    parser.add_argument("--steps", type=int, help="timed steps per run (GPU 30, CPU 3)")
    parser.add_argument("--warmup", type=int, help="untimed steps first, the compile among them (GPU 3, CPU 1)")
    parser.add_argument("--check-steps", type=int, default=3, help="steps whose losses are compared (3)")
    parser.add_argument("--rtol", type=float, default=2e-4, help="largest relative loss difference (2e-4)")
    parser.add_argument("--run-timeout", type=float, default=150, help="seconds for one process (150)")
    parser.add_argument("--budget", type=float, default=540, help="seconds for the whole check (540)")
    args = parser.parse_args(argv)
    workloads = [w for w in args.workloads.split(",") if w]
    unknown = sorted(set(workloads) - set(NAMES))
    if unknown:
        parser.error(f"unknown workloads {unknown}; the workloads are {', '.join(NAMES)}")
    steps = args.steps if args.steps is not None else (3 if args.cpu else 30)
    warmup = args.warmup if args.warmup is not None else (1 if args.cpu else 3)
    check_steps = min(args.check_steps, warmup + steps)
    clock = Clock(args.budget, args.run_timeout)

    if not args.cpu:  # stop at once, before any workload, when jax or torch sees no GPU
        seen, why = _child(["--preflight"], args.cpu, clock)
        if seen is None:
            print(f"GPU check stopped before any workload: {why}", file=sys.stderr)
            return 2 if why.startswith("no GPU") else 1
    lines, where_each, passed = check(workloads, args.cpu, steps, warmup, check_steps, args.rtol, clock)
    print(f"\nGPU check{' in --cpu mode (not a benchmark: fewer steps)' if args.cpu else ''}: median ms per "
          f"float32 training step over {steps} steps after {warmup} warm-up steps, each system in its own process; "
          "full float32 products everywhere (no TF32); the batch held on the device by all three (gradgen is fed "
          "jax arrays); a ratio below 1 means gradgen is faster. Ran: "
          + "; ".join(where_each.values()) + ".\n")
    print("\n".join(lines))
    print(f"\n{'PASSED' if passed else 'FAILED'}: gradgen's losses "
          f"{'match' if passed else 'do not all match'} its CPU reference (relative tolerance {args.rtol:g}).")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
