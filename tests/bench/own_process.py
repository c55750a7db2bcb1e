"""Rows that need a process of their own: ``python -m tests.bench.own_process KIND`` prints one JSON row.

- ``malloc``: numpy's seed step with glibc's heap kept warm (``mallopt``), a labelled variant of the baseline:
  mallopt changes the whole process, so it never runs inside the main bench.
- ``compile``: the seed step's plan built and run once, the generated kernels compiled or loaded from
  ``GRADGEN_CACHE_DIR`` (the caller points it at an empty folder for a fresh compile, then at the same one).
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


def _compile_row() -> dict:
    start = time.perf_counter()
    from .cases import _mlp_step  # imports gradgen (and numba, lazily, when a plan fuses)

    gradgen_step, _, _, _ = _mlp_step(64, 1000, 100, 10, "float64", 1e-6)
    built = time.perf_counter()
    gradgen_step()  # builds the plan, compiles or loads its kernels, runs once
    first = time.perf_counter() - built
    t = time.perf_counter()
    gradgen_step()
    later = time.perf_counter() - t
    return {"case": "seed step plan: build + compile, first run minus a later one", "gradgen_s": first - later,
            "numpy_s": None, "unit": f"s (imports and program building: {built - start:.2f} s)"}


def main() -> None:
    kind = sys.argv[1]
    row = _malloc_row(sys.argv[2], int(sys.argv[3])) if kind == "malloc" else _compile_row()
    print(json.dumps(row))


if __name__ == "__main__":
    main()
