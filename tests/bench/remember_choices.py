"""Make the default executor's remembered choices (``runtime/remembered.py``) for the anchors' workloads before timing
them. A record's key holds a digest of gradgen's code, so after any change to it every record is stale, and the
anchors' harness, whose processes run each system for a few seconds, then times each workload's trial instead of
its choice (``design_docs/performance.md``, the fifteenth stop of 2026-12-01: LeNet's default 8.04 ms a step
against its engine's 6.99). Each workload runs the default ``Executor()`` in a fresh process of its own, built
as the harness builds it (the anchors' ``wl.setup_gradgen``), until its choice is remembered or checked once,
or ``--seconds`` run out (the transformer's trial and first check take about 40 s on 2 cores).

    python -m tests.bench.remember_choices                          # lenet resnet transformer rnn
    python -m tests.bench.remember_choices transformer --seconds 60
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from .engine_survey import DEFAULT_FOLDER

__all__ = ["WORKLOADS", "remember"]

WORKLOADS = ("lenet", "resnet", "transformer", "rnn")
_SETTLED = ("checked again", "remembered from")
"""Words of ``Executor.backend_choice``'s reason once a record stands: the trial's choice checked once (and
recorded again), or a record found."""


def remember(workload: str, folder: str, seconds: float) -> str:
    """Run ``workload``'s step on the default executor in this process until its choice is settled (``_SETTLED``)
    or ``seconds`` pass; the choice and its reason."""
    sys.path.insert(0, folder)
    import wl

    step, _, (exe, main, *_) = wl.setup_gradgen(workload, *wl.DATA[workload]())
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        choice = exe.backend_choice(main)
        if choice is not None and any(words in choice[1] for words in _SETTLED):
            break
    choice = exe.backend_choice(main)
    return f"{workload}: {choice[0]} after {time.perf_counter() - start:.1f} s ({choice[1]})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workloads", nargs="*", help=f"any of {', '.join(WORKLOADS)} (default: all)")
    parser.add_argument("--seconds", type=float, default=45.0, help="the most each workload runs")
    parser.add_argument("--anchors", default=DEFAULT_FOLDER, help="the anchors' workloads folder")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    unknown = sorted(set(args.workloads) - set(WORKLOADS))
    if unknown:
        parser.error(f"unknown workloads {unknown}: choose from {', '.join(WORKLOADS)}")
    if args.one:
        print(remember(args.one, args.anchors, args.seconds), flush=True)
        return
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    for workload in args.workloads or WORKLOADS:  # (each in a process of its own, as the harness runs it)
        subprocess.run([sys.executable, "-m", "tests.bench.remember_choices", "--one", workload, "--seconds",
                        str(args.seconds), "--anchors", args.anchors], env=env, check=True,
                       timeout=args.seconds + 300)


if __name__ == "__main__":
    main()
