"""Rows that need a process of their own: ``python -m tests.bench.own_process KIND`` prints a JSON list of rows.

- ``malloc CASE REPEATS``: the numpy loop with glibc's heap kept warm (``mallopt``), a labelled variant of the
  baseline: mallopt changes the whole process, so it never runs where another system is timed.
- ``compile``: the seed step's plan built, then its fused loops compiled or loaded from ``GRADGEN_CACHE_DIR``
  (the caller points it at an empty folder for a fresh compile, then at the same one for a cached load).
"""
from __future__ import annotations

import ctypes
import json
import sys
import time


def keep_heap_warm() -> bool:
    """Stop glibc from trimming the heap after frees, for the malloc-tuned row: this whole process only.

    Left alone, the hand-written numpy step's megabyte-sized temporaries are
    returned to the OS and faulted in again each call: the same numpy step
    then took 1.15 ms instead of 0.53 ms (seed MLP, float64, one BLAS
    thread). Returns False where there is no glibc.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    return bool(libc.mallopt(m_trim_threshold, 2 ** 30)) and bool(libc.mallopt(m_mmap_threshold, 32 * 2 ** 20))


def _malloc_row(case: str, repeats: int) -> dict:
    from .compare import worker
    from .steps import CASES

    warm = keep_heap_warm()
    n = worker("numpy", case, repeats)["median_s"]
    return {"case": f"  numpy loop, malloc tuned, own process ({CASES[case][-1]})", "gradgen_s": n,
            "numpy_s": None, "unit": "s" if warm else "s (no glibc: untuned)"}


def _compile_rows() -> list[dict]:
    """The plan's build: the first run minus a steady one."""
    from .steps import make_step

    gradgen_step = make_step("gradgen", "seed-f64")
    times = []
    for _ in range(3):
        start = time.perf_counter()
        gradgen_step()
        times.append(time.perf_counter() - start)
    steady = min(times[1:])
    return [{"case": "seed step: plan build (first run minus a later one)", "gradgen_s": times[0] - steady,
             "numpy_s": None, "unit": "s"}]


def main() -> None:
    kind = sys.argv[1]
    rows = [_malloc_row(sys.argv[2], int(sys.argv[3]))] if kind == "malloc" else _compile_rows()
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
