"""Where one of the anchors' model steps spends its time on a gradgen engine, by gradgen's own profiler
(``Executor(profile=True)``, ``tools/profile_text``): how the numpy engine's costs were attributed to kernels.

    python -m tests.bench.profile_workload transformer                # numpy engine, 20 timed runs
    python -m tests.bench.profile_workload resnet --backend xla --runs 10
    python -m tests.bench.profile_workload lenet --anchors ../shared/anchors

The workloads (LeNet, ResNet blocks, a transformer block, an RNN) and their data come from the anchors'
``workloads/wl.py`` (``--anchors``, default ``../shared/anchors`` beside the checkout): a measuring aid, not a
dependency of gradgen. Time with ``OPENBLAS_CORETYPE`` unset, as the anchors' ``run.sh`` does.
"""
from __future__ import annotations

import argparse
import os
import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=["lenet", "resnet", "transformer", "rnn"])
    parser.add_argument("--backend", default="numpy")
    parser.add_argument("--runs", type=int, default=20, help="timed runs, after 3 untimed ones")
    parser.add_argument("--top", type=int, default=25, help="slowest steps listed")
    parser.add_argument("--anchors", default=os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared",
                                                          "anchors"))
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.join(os.path.abspath(args.anchors), "workloads"))
    import wl  # the anchors' workloads

    from gradgen.framework import Executor, Scope
    from gradgen.framework.tools.profile_text import profile_text

    main_program, startup, loss, feed, params = wl.gg_build(args.workload, *wl.DATA[args.workload]())
    exe, scope = Executor(profile=True, backend=args.backend), Scope()
    exe.run(startup, scope=scope)
    for name, value in params.items():
        scope.set(name, value.copy())
    for _ in range(3):
        exe.run(main_program, feed=feed, fetch_list=[loss], scope=scope)
    exe.reset_profile()
    for _ in range(args.runs):
        exe.run(main_program, feed=feed, fetch_list=[loss], scope=scope)
    print(profile_text(main_program, exe.profile(main_program), top=args.top))


if __name__ == "__main__":
    main()
