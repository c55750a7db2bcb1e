"""The 64-machine scaling model of design_docs/distributed.md: ``python -m tests.bench.scaling_model``.

For the 50-layer MLP (1024 wide, batch 256 per machine, float32) and the large MLP
(512 x 4096 -> 4096 -> 1000, float32) it prints, per link speed, the bytes each
machine all-reduces per step, the ring all-reduce time, the backward time, and the
communication left exposed after overlap for several bucket sizes and for fp16
gradients. Compute times are the models' matmul flops at a sustained rate: this
machine's (``THIS_MACHINE_FLOPS``, from the quiet-machine step times in
design_docs/performance.md; ``--measure`` times the models here instead) and an
accelerator's. Everything else is arithmetic on the constants below.

The overlap model: gradients become ready during backward in proportion to the
matmul flops done so far (gradgen emits each layer's input gradient, then its
weight gradient); buckets fill in that order as ``data_parallel`` fills them; one
link carries one bucket at a time; a bucket leaves when it is complete and the
link is free. What is still travelling when backward ends is exposed.
"""
from __future__ import annotations

import argparse
import time
from typing import NamedTuple, Sequence

import numpy as np

from gradgen.framework import Executor, Scope, append_backward
from gradgen.program import Program, layers, program_guard
from gradgen.program.initializer import Normal

MACHINES = 64
LATENCY_S = 10e-6
"""Per message step of the ring (one hop's software and switch latency): a round figure for a tuned TCP/RoCE
cluster."""
LINKS_GBPS = (10, 25, 100)
BUCKETS_MIB = (4, 25, None)
"""Bucket sizes compared; None is one bucket for the whole model (no overlap possible)."""


THIS_MACHINE_FLOPS = 235e9
"""float32 matmul flops per second gradgen sustains on this 2-core machine: the 50-layer step (80 GFLOP) in
0.344 s and the large MLP step (47 GFLOP) in 197 ms, both from design_docs/performance.md."""
ACCELERATOR_FLOPS = 20e12
"""A round figure for one accelerator's sustained float32 (or tf32) matmul rate."""


class Model(NamedTuple):
    name: str
    dims: list[int]
    batch: int

    @property
    def grads(self) -> list[tuple[int, float]]:
        """In the order backward makes them: (bytes, fraction of backward done when it is ready)."""
        return _mlp_grads(self.dims)

    def flops(self) -> tuple[float, float]:
        """(forward, backward) matmul flops of one step (the first layer's input gradient is not made)."""
        pairs = list(zip(self.dims[:-1], self.dims[1:]))
        forward = sum(2.0 * self.batch * a * b for a, b in pairs)
        return forward, 2 * forward - 2.0 * self.batch * pairs[0][0] * pairs[0][1]


def _mlp_grads(dims: Sequence[int], itemsize: int = 4) -> list[tuple[int, float]]:
    """Weight gradients of a bias-free MLP, last layer first, with the flop fraction at which each is ready."""
    layers = list(zip(dims[:-1], dims[1:]))
    work = []  # per layer, last first: (input-gradient flops, weight-gradient flops)
    for i, (a, b) in reversed(list(enumerate(layers))):
        work.append((a * b if i > 0 else 0, a * b))  # the first layer's input is data: no gradient
    total = sum(dx + dw for dx, dw in work)
    done, out = 0, []
    for (dx, dw), (a, b) in zip(work, reversed(layers)):
        done += dx + dw
        out.append((a * b * itemsize, done / total))
    return out


FIFTY = Model("50-layer MLP", [1024] * 51, 256)
LARGE = Model("large MLP", [4096, 4096, 1000], 512)


def ring_seconds(nbytes: float, gbps: float, machines: int = MACHINES, latency: float = LATENCY_S) -> float:
    """Ring all-reduce: reduce-scatter then all-gather, 2 (p - 1) steps each moving nbytes / p per machine."""
    steps = 2 * (machines - 1)
    return steps * latency + steps / machines * nbytes * 8 / (gbps * 1e9)


def buckets(grads: list[tuple[int, float]], bucket_bytes: float | None) -> list[tuple[int, float]]:
    """(bytes, ready fraction) of each bucket, filled as ``data_parallel`` fills them."""
    out, size, ready = [], 0, 0.0
    for nbytes, at in grads:
        size, ready = size + nbytes, at
        if bucket_bytes is not None and size >= bucket_bytes:
            out.append((size, ready))
            size = 0
    if size:
        out.append((size, ready))
    return out


def exposed_seconds(grads, bucket_bytes, backward_s: float, gbps: float, compress: float = 1.0) -> float:
    """Communication still running when backward ends (0 when overlap hides it all)."""
    link_free = 0.0
    for nbytes, ready in buckets(grads, bucket_bytes):
        begin = max(ready * backward_s, link_free)
        link_free = begin + ring_seconds(nbytes * compress, gbps)
    return max(0.0, link_free - backward_s)


def measure_backward(dims: Sequence[int], batch: int, repeats: int = 3) -> tuple[float, float]:
    """(forward seconds, backward seconds) of one gradgen step of a bias-free ReLU MLP, best of ``repeats``."""
    forward, startup = Program(), Program()
    with program_guard(forward, startup):
        h = x = layers.data("x", [-1, dims[0]], "float32")
        for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
            h = layers.relu(h @ layers.create_parameter([a, b], "float32", name=f"w{i}",
                                                        initializer=Normal(0.0, 0.02, seed=i)))
        loss = layers.mean(layers.square(h))
    full = forward.clone()
    with program_guard(full, startup):
        append_backward(full.global_block().var(loss.name))
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    feed = {x.name: np.random.default_rng(0).standard_normal((batch, dims[0]), dtype=np.float32)}
    best = []
    for program in (forward, full):
        times = []
        for _ in range(repeats + 1):
            begin = time.perf_counter()
            exe.run(program, feed=feed, fetch_list=[loss.name], scope=scope)
            times.append(time.perf_counter() - begin)
        best.append(min(times[1:]))
    return best[0], best[1] - best[0]


def table(rows: list[tuple[Model, str, float, float]]) -> str:
    """The markdown table: one row per model, compute speed and link speed."""
    head = ("| model | compute | GB per step | link | ring all-reduce | backward | exposed: 4 MiB buckets | "
            "25 MiB | one bucket | 25 MiB, fp16 | step efficiency (25 MiB) |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for model, where, forward_s, backward_s in rows:
        total = sum(b for b, _ in model.grads)
        for gbps in LINKS_GBPS:
            cells = [exposed_seconds(model.grads, None if mib is None else mib * 2 ** 20, backward_s, gbps)
                     for mib in BUCKETS_MIB]
            half = exposed_seconds(model.grads, 25 * 2 ** 20, backward_s, gbps, compress=0.5)
            compute = forward_s + backward_s
            lines.append(f"| {model.name} | {where} | {total / 1e9:.3f} | {gbps} Gb/s | "
                         f"{_ms(ring_seconds(total, gbps))} | {_ms(backward_s)} | " + " | ".join(map(_ms, cells)) +
                         f" | {_ms(half)} | {compute / (compute + cells[1]):.0%} |")
    return "\n".join(lines)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds < 0.01 else f"{seconds * 1e3:.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.scaling_model")
    parser.add_argument("--measure", action="store_true", help="also time both models here (minutes when loaded)")
    args = parser.parse_args()
    rows = []
    for model in (FIFTY, LARGE):
        forward, backward = model.flops()
        print(f"{model.name} ({model.dims[0]} -> ... -> {model.dims[-1]}, {len(model.dims) - 1} layers, batch "
              f"{model.batch} per machine, f32): {forward / 1e9:.1f} GFLOP forward, {backward / 1e9:.1f} backward")
        for where, rate in (("this machine", THIS_MACHINE_FLOPS), ("accelerator", ACCELERATOR_FLOPS)):
            rows.append((model, where, forward / rate, backward / rate))
        if args.measure:
            f, b = measure_backward(model.dims, model.batch)
            print(f"  measured here now: forward {f * 1e3:.0f} ms, backward {b * 1e3:.0f} ms")
    print(f"\n{MACHINES} machines, ring all-reduce, {LATENCY_S * 1e6:.0f} us per ring step; this machine "
          f"{THIS_MACHINE_FLOPS / 1e9:.0f} GFLOP/s, accelerator {ACCELERATOR_FLOPS / 1e12:.0f} TFLOP/s\n")
    print(table(rows))


if __name__ == "__main__":
    main()
