"""Rows that need a process of their own: ``python -m tests.bench.own_process KIND`` prints a JSON list of rows.

- ``malloc``: numpy's seed step with glibc's heap kept warm (``mallopt``), a labelled variant of the baseline:
  mallopt changes the whole process, so it never runs inside the main bench.
- ``compile``: the seed step's plan built, then its fused loops compiled or loaded from ``GRADGEN_CACHE_DIR``
  (the caller points it at an empty folder for a fresh compile, then at the same one for a cached load).
"""
from __future__ import annotations

import json
import sys
import time


def _malloc_row(dtype: str, repeats: int) -> dict:
    from .cases import _mlp_step, keep_heap_warm, paired_medians

    warm = keep_heap_warm()
    _, numpy_step, _, _ = _mlp_step(64, 1000, 100, 10, dtype, 1e-6)
    (n,) = paired_medians([numpy_step], repeats)
    return {"case": f"  numpy loop, malloc tuned, own process ({dtype})", "gradgen_s": n, "numpy_s": None,
            "unit": "s" if warm else "s (no glibc: untuned)"}


def _compile_rows() -> list[dict]:
    """The plan's build (first run minus a steady one) and the fused loops' compile or cache load (the run
    after the warm runs, minus a steady one)."""
    from gradgen.framework.runtime.plan_data import PlanOptions

    from .cases import _mlp_step  # imports gradgen; numba is imported only when a loop is loaded

    gradgen_step, _, _, _ = _mlp_step(64, 1000, 100, 10, "float64", 1e-6)
    times = []
    for _ in range(PlanOptions().warm_runs + 3):
        start = time.perf_counter()
        gradgen_step()
        times.append(time.perf_counter() - start)
    steady = min(times[-2:])
    return [{"case": "seed step: plan build (first run minus a later one)", "gradgen_s": times[0] - steady,
             "numpy_s": None, "unit": "s"},
            {"case": "seed step: fused loops compiled or loaded (numba import included)",
             "gradgen_s": times[PlanOptions().warm_runs] - steady, "numpy_s": None, "unit": "s"}]


def main() -> None:
    kind = sys.argv[1]
    rows = [_malloc_row(sys.argv[2], int(sys.argv[3]))] if kind == "malloc" else _compile_rows()
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
