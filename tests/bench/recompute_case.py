"""Recompute on the 50-layer MLP step of ``cases.peak_memory_step``: memory and time with sqrt(n) checkpoints.

Memory is the peak over the resting state of a first run (which allocates the
plan's reusable buffers), predicted (``analyze_memory``) and measured
(tracemalloc), for two programs: the forward and backward part alone
(its parameter gradients die as soon as they are made, so the peak is the
activations plus a layer's worth of gradients) and the whole SGD step (whose
peak holds the 50 new weights staged for the atomic commit: recompute cannot
change that). Time is the whole SGD step, medians, the two programs
timed in alternation so that drift on the machine hits both alike.
"""
from __future__ import annotations

import gc
import statistics
import time
import tracemalloc

import numpy as np

from gradgen.framework import Executor, Scope, append_backward, optimizer
from gradgen.framework.tools.memory import analyze_memory
from gradgen.framework.passes.recompute import evenly_spaced_checkpoints, outputs_of_type
from gradgen.program import Program, layers, program_guard
from gradgen.program.initializer import Normal


def _step(checkpointed: bool, sgd: bool, layers_count: int, width: int):
    main, startup = Program(), Program()
    with program_guard(main, startup):
        h = layers.data("x", [-1, width], "float32")
        for i in range(layers_count):
            w = layers.create_parameter([width, width], "float32", name=f"w{i}", initializer=Normal(0.0, 0.02, seed=i))
            h = layers.relu(h @ w)
        loss = layers.mean(layers.square(h))
        picked = evenly_spaced_checkpoints(outputs_of_type(main.global_block(), "relu")) if checkpointed else None
        params_grads = append_backward(loss, checkpoints=picked)
        if sgd:
            optimizer.SGD(1e-3).apply_gradients(params_grads)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    return main, loss, exe, scope, len(picked or ())


def _peaks(checkpointed: bool, sgd: bool, xs: np.ndarray, layers_count: int, width: int) -> tuple[float, float]:
    """(predicted, measured) peak MiB over resting of a first run."""
    main, loss, exe, scope, _ = _step(checkpointed, sgd, layers_count, width)
    predicted = analyze_memory(main, {"x": xs.shape}, [loss]).peak_bytes
    # The first run: it allocates the plan's buffers, which the schedule's lifetimes size (later runs
    # reuse them and allocate about nothing, with or without checkpoints).
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    exe.run(main, feed={"x": xs}, fetch_list=[loss], scope=scope)
    measured = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return predicted / 2 ** 20, measured / 2 ** 20


def _step_times(xs: np.ndarray, repeats: int, layers_count: int, width: int) -> tuple[list, list, int]:
    """Seconds of each SGD step without and with checkpoints, run in alternation, and the number of checkpoints."""
    plain, ckpt = _step(False, True, layers_count, width), _step(True, True, layers_count, width)
    runs = {0: [], 1: []}
    for k in range(repeats + 1):
        for which, (main, loss, exe, scope, _) in enumerate((plain, ckpt)):
            start = time.perf_counter()
            exe.run(main, feed={"x": xs}, fetch_list=[loss], scope=scope)
            if k:  # the first round is warm-up
                runs[which].append(time.perf_counter() - start)
    return runs[0], runs[1], ckpt[4]


def _ratio_row(case: str, with_: float, without: float, unit: str) -> dict:
    return {"case": case, "gradgen_s": with_ / without, "numpy_s": None, "with": with_, "without": without,
            "unit": f"with / without: {with_:.4g} / {without:.4g} {unit}"}


def recompute_rows(repeats: int, layers_count: int = 50, width: int = 1024, batch: int = 256) -> list[dict]:
    """The rows for the bench table: each a with/without ratio, the two values in its unit text."""
    xs = np.random.default_rng(0).standard_normal((batch, width)).astype("float32")
    plain, ckpt, count = _step_times(xs, repeats, layers_count, width)
    name = f"recompute ({count} ckpts):"
    # The median of each round's ratio too: on a shared machine it shrugs off load that comes and goes.
    paired = statistics.median(c / p for c, p in zip(ckpt, plain))
    rows = [_ratio_row(f"{name} step time", statistics.median(ckpt), statistics.median(plain),
                       f"s, medians; median of paired ratios {paired:.3g}")]
    rows[0]["paired_ratio"] = paired
    for sgd, part in ((False, "fwd+bwd"), (True, "whole step")):
        (p_with, m_with), (p_without, m_without) = (_peaks(c, sgd, xs, layers_count, width) for c in (True, False))
        rows.append(_ratio_row(f"{name} {part} peak, analysis", p_with, p_without, "MiB"))
        rows.append(_ratio_row(f"{name} {part} peak, tracemalloc", m_with, m_without, "MiB"))
    return rows


if __name__ == "__main__":
    for row in recompute_rows(11):
        print(f"{row['case']:<58} {row['gradgen_s']:6.3f}  ({row['unit']})")
