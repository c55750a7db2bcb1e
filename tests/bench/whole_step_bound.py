"""What compiling the seed MLP's whole step would reach: the bound on the issue's seed-MLP figure.

    python -m tests.bench.whole_step_bound                        # seed f32 and f64, 5 rounds
    python -m tests.bench.whole_step_bound --rounds 3 --cases seed-f32

The bench's MLP step (``steps.py``) four ways, each in a worker process of its own, in rotating rounds
(``compare.run_rounds``; in one process the torch and OpenBLAS thread pools slow each other's runs): ``compiled_ops``,
gradgen's program compiled whole by inductor from its ops' own computes (``steps._compiled_ops``); ``gradgen``, the
numpy engine (the default's choice for this step); ``numpy``, the loop as a user writes it; ``numpy_gemms``, the
step's five products alone (the floor of any engine on numpy's BLAS). PyTensor's C backend, the figure's peer, is
the anchors' (``run.sh -s pytensor_c seed-f32``), timed beside it. Needs torch (the ``oracle`` extra) and a C++
compiler for inductor.
"""
from __future__ import annotations

import argparse

from .compare import print_table, run_rounds, steps_per_run
from .steps import CASES

__all__ = ["SYSTEMS", "main"]

SYSTEMS = ("compiled_ops", "gradgen", "numpy", "numpy_gemms")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cases", default="seed-f32,seed-f64", help=f"comma-separated, of {', '.join(CASES)}")
    args = parser.parse_args(argv)
    cases = tuple(args.cases.split(","))
    results, missing = run_rounds(SYSTEMS, cases, args.rounds, steps_per_run)
    print_table(SYSTEMS, cases, results, missing)


if __name__ == "__main__":
    main()
