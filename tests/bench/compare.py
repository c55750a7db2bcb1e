"""Each system in a process of its own, taking turns in interleaved rounds; ``python -m tests.bench --compare``.

``python -m tests.bench.compare SYSTEM CASE REPEATS`` is the worker: it times ``REPEATS`` steps of one system
(``steps.MAKERS``) in a fresh process and prints their median. ``run_rounds`` starts one worker per system and
case, round after round, and keeps each median; the main bench's MLP rows and ``--compare``'s table are the
medians over rounds. No worker changes the allocator or a BLAS thread pool, so every system runs as its users
run it. ``--compare`` adds PyTorch, JAX and PyTensor, reported as missing where not importable (none of them
is a gradgen dependency).
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from typing import Callable

from .steps import CASES, make_step

SYSTEMS = ("gradgen", "gradgen@xla", "numpy", "torch", "jax", "pytensor")
LOCAL = ("gradgen", "gradgen@xla", "numpy", "numpy_gemms", "provider_gemms", "compiled_ops")
"""Systems that run in this interpreter; the others run in ``--python``'s."""


def worker(system: str, case: str, repeats: int, warmup: int = 3) -> dict:
    """Time ``repeats`` steps of ``case`` on ``system`` in this process, after ``warmup`` steps (gradgen's
    plan is built in the first and its fused loops loaded in the third); the median in seconds."""
    try:
        step = make_step(system, case)
    except ImportError as e:
        return {"system": system, "case": case, "missing": str(e)}
    for _ in range(warmup):
        step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return {"system": system, "case": case, "median_s": statistics.median(times)}


def run_rounds(systems: tuple[str, ...], cases: tuple[str, ...], rounds: int, repeats: Callable[[str], int],
               python: str = sys.executable) -> tuple[dict[tuple[str, str], list[float]], dict[str, str]]:
    """``rounds`` rounds in which every system times every case in a worker process of its own (``repeats(case)``
    steps); the systems' order rotates from round to round, so none always follows the same neighbour. Returns
    the medians by (case, system), one per round, and the systems that could not run, with why."""
    results: dict[tuple[str, str], list[float]] = {}
    missing: dict[str, str] = {}
    for r in range(rounds):
        for case in cases:
            for system in systems[r % len(systems):] + systems[:r % len(systems)]:
                if system in missing:
                    continue
                exe = sys.executable if system in LOCAL else python
                out = subprocess.run([exe, "-m", "tests.bench.compare", system, case, str(repeats(case))],
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
    return results, missing


def compare_main(python: str, quick: bool = False) -> None:
    """Interleaved rounds of every system on every case, each in its own process: gradgen and numpy in this
    interpreter, the others in ``python`` (an environment that has them, e.g. the anchors harness's)."""
    rounds, cases = (2, ("seed-f64", "seed-f32")) if quick else (5, tuple(CASES))
    results, missing = run_rounds(SYSTEMS, cases, rounds, steps_per_run, python)
    print_table(SYSTEMS, cases, results, missing)


def steps_per_run(case: str) -> int:
    """Steps a worker times for ``case``: a few of the large MLP's, a hundred of the seed's."""
    return 5 if case.startswith("large") else 101


def print_table(systems: tuple[str, ...], cases: tuple[str, ...], results: dict, missing: dict[str, str]) -> None:
    """``run_rounds``' results as a table: a row per case, a column per system, the median over rounds in ms."""
    print(f"{'case':<12}" + "".join(f"{s:>14}" for s in systems)
          + "   (ms, median over rounds; each in its own process)")
    for case in cases:
        cells = []
        for system in systems:
            ts = results.get((case, system))
            cells.append(f"{statistics.median(ts) * 1e3:14.3f}" if ts else f"{'-':>14}")
        print(f"{case:<12}" + "".join(cells))
    for system, why in missing.items():
        print(f"{system}: not run ({why})")


if __name__ == "__main__":
    print(json.dumps(worker(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
