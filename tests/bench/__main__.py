"""Run the benchmark suite: ``python -m tests.bench [--quick] [--json FILE]``.

Prints one row per case: gradgen's median, the hand-written numpy baseline's
median measured in the same run, and their ratio (below 1 means gradgen is
faster). The MLP steps and their GEMM floors run each side in a process of its
own, in interleaved rounds (``mlp_rows``); the other cases run here, their two
sides interleaved call by call. Writes the rows as JSON too.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile

import numpy as np

from gradgen.framework.backend.numpy.blas import PROVIDER, provider_threads

from . import cases
from .mlp_rows import mlp_rows
from .recompute_case import recompute_rows


def _own_process(args: list[str], cache: str | None = None) -> list[dict]:
    """Rows measured by ``tests.bench.own_process`` in a process of its own (an allocator change, a cold start)."""
    env = dict(os.environ, **({"GRADGEN_CACHE_DIR": cache} if cache else {}))
    out = subprocess.run([sys.executable, "-m", "tests.bench.own_process", *args], capture_output=True, text=True,
                         env=env, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench")
    parser.add_argument("--quick", action="store_true", help="fewer repeats, skip the large cases")
    parser.add_argument("--json", default="bench_results.json", help="where to write the results")
    parser.add_argument("--compare", action="store_true",
                        help="also time PyTorch, JAX and PyTensor (when importable), each in its own process")
    parser.add_argument("--python", default=sys.executable,
                        help="with --compare: the interpreter that has PyTorch, JAX, PyTensor (default: this one)")
    args = parser.parse_args()
    if args.compare:
        from .compare import compare_main

        compare_main(args.python, quick=args.quick)
        return
    repeats = 5 if args.quick else 51
    provider = PROVIDER.name if PROVIDER else "numpy matmul"
    threads = f", {provider_threads(PROVIDER)} threads" if PROVIDER else ""
    print(f"gradgen's BLAS: {provider}{threads}; default malloc; "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')} "
          f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE', '(unset)')}")
    mlp_cases = ("seed-f64", "seed-f32") if args.quick else ("seed-f64", "seed-f32", "large-f32")
    block = {"seed-f64": 21, "seed-f32": 21} if args.quick else {"seed-f64": 51, "seed-f32": 51, "large-f32": 5}
    rows = []
    for case, case_rows in mlp_rows(mlp_cases, 3 if args.quick else 5, block, provider).items():
        rows += case_rows
        if case.startswith("seed"):
            rows += _own_process(["malloc", case, str(block[case])])
    rows += [*cases.tanh_chain(repeats), cases.tiny_op_chain(repeats), cases.dispatch_overhead(repeats)]
    with tempfile.TemporaryDirectory() as cache:
        for label in ("fresh cache", "cached"):
            rows += [{**row, "case": f"{row['case']}, {label}"} for row in _own_process(["compile"], cache)]
    for n in (1000, 4000, 16000, 64000):  # 64k takes a few seconds since the pass is linear: quick runs keep it
        rows.append(cases.backward_chain(n))
    if not args.quick:
        rows += cases.peak_memory_step()
        rows += recompute_rows(11)
    print(f"{'case':<58} {'gradgen':>12} {'numpy/base':>12} {'ratio':>7}")
    for row in rows:
        unit = row.get("unit", "s")
        g, n = row["gradgen_s"], row["numpy_s"]
        ratio = f"{g / n:7.2f}" if n else "      -"
        shown_n = f"{n:12.4g}" if n is not None else f"{'-':>12}"
        print(f"{row['case']:<58} {g:12.4g} {shown_n} {ratio}  ({unit}{', medians' if unit == 's' else ''})")
        if "overhead_us_per_op" in row:
            print(f"{'  overhead above the numpy calls, per op':<58} {row['overhead_us_per_op']:12.3g} us")
    chain = [r for r in rows if r["case"].startswith("append_backward")]
    for a, b in zip(chain, chain[1:]):
        print(f"append_backward growth {a['case'].split(', ')[1]} -> {b['case'].split(', ')[1]}: "
              f"{b['gradgen_s'] / a['gradgen_s']:.2f}x")
    with open(args.json, "w") as f:
        json.dump({"machine": platform.platform(), "numpy": np.__version__, "rows": rows}, f, indent=1)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
