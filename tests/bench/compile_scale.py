"""Programs of 1k to 32k ops on an engine: the first run's time, the peak memory, and the longest later run
against the steady step (issue 32, "Compiles that scale and never stall a run").

    python -m tests.bench.compile_scale                       # the default Executor(), 1k, 4k, 16k, 32k ops
    python -m tests.bench.compile_scale --engine xla --sizes 1000,2000,3000
    python -m tests.bench.compile_scale --processes 2       # and again, as a user's second run of the program

The program is the issue's chain: x -> (scale, tanh) repeated -> fc -> mean, with its backward and SGD, so
the op count grows with the chain. Each size runs in a process of its own with an empty compile cache; peak
memory is the process's maximum resident set (``ru_maxrss``). "Longest wait" is the slowest of the runs after
the first, over the median of the last ten: a run that waited for a compile shows here. Each size runs
``--runs`` times and for ``--seconds`` at least, so that the default's background preparation (after its first
second of runs) falls inside the measured runs at every size.

A run can also wait for Python's cyclic garbage collector: a full collection walks every object the process
holds (jax's import adds some 10^5), 15-90 ms on a 2-core AMD EPYC, whichever thread triggers it. The last two
columns tell those runs apart (``gc.callbacks``): how many runs held a full collection, and the longest later run
that held none.

Which runs waited, and on what. Before the default's choice its runs are the numpy reference's, beside the compiled
engines' preparations (imports, traces, compiles) that share the interpreter lock with them; after it they are the
chosen engine's. So two more columns: the longest run between the first second and the choice over numpy's step
alone (the median of the first second's runs, before any preparation began: ``NUMPY_SECONDS_FIRST``), and the
longest run after the choice over the steady step (``split_waits``).

With ``--processes 2`` each size runs again in a second process sharing the first's cache folder (XLA's compile
cache and the default's remembered choice, ``runtime/remembered.py``): a user's second run of the same program,
whose first run waits for the remembered engine's preparation (``trial_rules.RECALLED_WAIT_SECONDS``) instead of
importing and compiling it beside the runs.
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

__all__ = ["main", "measure", "split_waits"]


def measure(engine: str, steps: int, runs: int, seconds: float = 0.0) -> dict:
    """Build the chain of ``steps`` (scale, tanh) pairs, run it ``runs`` times on ``engine`` ("auto": the
    default ``Executor()``), and on until ``seconds`` have passed: the default's candidates prepare only after a
    second of runs, so 40 runs of a short step would end before any compile began."""
    import gc
    import resource

    import numpy as np

    from gradgen.framework import Executor, Scope, optimizer
    from gradgen.program import Program, layers, program_guard

    main_program, startup = Program(), Program()
    with program_guard(main_program, startup):
        h = layers.data("x", [-1, 16], "float32")
        for k in range(steps):
            h = layers.tanh(layers.scale(h, 0.9 + 0.0001 * k))
        loss = layers.reduce_mean(layers.fc(h, 4))
        optimizer.SGD(0.01).minimize(loss)
    ops = len(main_program.global_block().ops)
    exe, scope = Executor(backend=None if engine == "auto" else engine), Scope()
    exe.run(startup, scope=scope)
    feed = {"x": np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)}
    times: list[float] = []
    full_collections = [0]

    def count_full(phase: str, info: dict) -> None:
        full_collections[0] += phase == "start" and info["generation"] == 2

    gc.callbacks.append(count_full)
    collected: list[bool] = []
    chosen_after: int | None = None  # (the run after which the choice was first seen)
    began = time.perf_counter()
    while len(times) < runs or time.perf_counter() - began < seconds:
        before, start = full_collections[0], time.perf_counter()
        exe.run(main_program, feed=feed, fetch_list=[loss], scope=scope)
        times.append(time.perf_counter() - start)
        collected.append(full_collections[0] != before)
        if chosen_after is None and exe.backend_choice(main_program) is not None:
            chosen_after = len(times) - 1
    gc.callbacks.remove(count_full)
    steady = statistics.median(times[-10:])
    choice = exe.backend_choice(main_program)
    uncollected = [t for t, c in zip(times[1:], collected[1:]) if not c]
    beside, after = split_waits(times, chosen_after if engine == "auto" else 0, steady)
    return {"ops": ops, "first_s": times[0], "steady_s": steady, "longest_wait": max(times[1:]) / steady,
            "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "choice": choice and choice[0],
            "runs": len(times), "collected_runs": sum(collected[1:]),
            "longest_uncollected": max(uncollected, default=0.0) / steady,
            "longest_beside": beside, "longest_after_choice": after}


def split_waits(times: list[float], chosen_after: int | None, steady: float, alone_seconds: float | None = None,
                alone_runs: int | None = None) -> tuple[float | None, float | None]:
    """(The longest run after numpy's first runs (``alone_runs`` and ``alone_seconds`` at least: ``NUMPY_FIRST``,
    ``NUMPY_SECONDS_FIRST``, before any preparation) up to the choice, over the median of those first runs but the
    very first; the longest run after the one the choice was first seen after, over ``steady``), each None where it
    has no runs. ``chosen_after``: that run's index, 0 for an engine fixed from the start, None when no choice
    came."""
    from gradgen.framework.runtime import trial_rules

    alone_seconds = trial_rules.NUMPY_SECONDS_FIRST if alone_seconds is None else alone_seconds
    alone_runs = trial_rules.NUMPY_FIRST if alone_runs is None else alone_runs
    end = len(times) if chosen_after is None else chosen_after + 1
    first = 0
    while first < end and (first < alone_runs or sum(times[:first]) < alone_seconds):
        first += 1
    alone, beside = times[1:first], times[first:end]
    after = times[max(1, end):] if chosen_after is not None else []
    return (max(beside) / statistics.median(alone) if beside and alone else None,
            max(after) / steady if after else None)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="auto")
    parser.add_argument("--sizes", default="1000,4000,16000,32000",
                        help="ops, roughly (2 per chain step: x is not trained, so the chain has no backward)")
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=8.0,
                        help="run at least this long, past the default's first second on numpy and the preparation "
                             "of the compiled engines that follows it (their compiles are what a later run may meet)")
    parser.add_argument("--processes", type=int, default=1,
                        help="processes run one after another for each size, sharing its cache folder (2: the "
                             "second shows a user's second run of the program, its engine remembered)")
    args = parser.parse_args(argv)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    print("| ops | first run (s) | steady step (ms) | longest later run / steady | peak memory (MiB) | engine | runs "
          "| runs with a full collection | longest later run without one / steady "
          "| longest run before the choice / numpy's step alone | longest run after the choice / steady |")
    print("|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "GRADGEN_CACHE_DIR": cache}
            env.pop("GRADGEN_BACKEND", None)
            code = (f"import json; from tests.bench.compile_scale import measure; "
                    f"print(json.dumps(measure({args.engine!r}, {max(1, size // 2)}, {args.runs}, {args.seconds})))")
            for process in range(1, args.processes + 1):
                done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                                      cwd=root, timeout=900)
                if done.returncode:
                    print(f"| ~{size} | failed: {done.stderr.strip().splitlines()[-1]} |", flush=True)
                    break
                r = json.loads(done.stdout.strip().splitlines()[-1])
                print(f"| {r['ops']}{'' if process == 1 else f' (process {process})'} | {r['first_s']:.2f} | "
                      f"{r['steady_s'] * 1e3:.2f} | {r['longest_wait']:.1f} | {r['peak_mib']:.0f} | "
                      f"{r['choice'] or args.engine} | {r['runs']} | {r['collected_runs']} | "
                      f"{r['longest_uncollected']:.1f} | {_ratio(r['longest_beside'])} | "
                      f"{_ratio(r['longest_after_choice'])} |", flush=True)


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


if __name__ == "__main__":
    main()
