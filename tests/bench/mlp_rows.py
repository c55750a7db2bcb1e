"""The main bench's MLP rows: gradgen's step, the numpy loop and the step's GEMM floors, each in its own process.

All four take turns in the rounds of ``compare.run_rounds``, so no BLAS pool or allocator state of one side
slows the other (MKL's spinning threads and numpy's OpenBLAS fought when both ran in one process). A row's
figure is the median over rounds of each round's median.
"""
from __future__ import annotations

import statistics

from .compare import run_rounds
from .steps import CASES

SYSTEMS = ("gradgen", "numpy", "numpy_gemms", "provider_gemms")


def mlp_rows(cases: tuple[str, ...], rounds: int, repeats: dict[str, int], provider: str) -> dict[str, list[dict]]:
    """Rows by case: gradgen's step against the numpy loop, then the five GEMMs alone through numpy and through
    ``provider`` (gradgen's BLAS), each against the numpy loop too. ``repeats`` holds the steps per block."""
    results, missing = run_rounds(SYSTEMS, cases, rounds, repeats.__getitem__)
    if missing:
        raise RuntimeError(f"MLP rows: systems failed to run: {missing}")
    unit = f"s, median of {rounds} rounds, each side in its own process"
    rows = {}
    for case in cases:
        per_round = {system: results[(case, system)] for system in SYSTEMS}
        med = {system: statistics.median(times) for system, times in per_round.items()}
        dtype = CASES[case][-1]
        base = {"numpy_s": med["numpy"], "unit": unit}
        rows[case] = [
            {"case": f"{case.split('-')[0]} MLP step ({dtype})", "gradgen_s": med["gradgen"], **base,
             "rounds_s": per_round},
            {"case": f"  its 5 GEMMs alone through numpy ({dtype})", "gradgen_s": med["numpy_gemms"], **base},
            {"case": f"  its 5 GEMMs alone through {provider}, gradgen's floor ({dtype})",
             "gradgen_s": med["provider_gemms"], **base}]
    return rows
