"""The torch engine beside PyTorch's own eager step, in one process, interleaved: the anchors' workload built by their
``wl.py`` (imported from ``--anchors``, not copied), run by ``Executor(backend="torch", threads=N)`` and by wl.py's
PyTorch step at the same thread count, in turn, so machine load hits both alike (design_docs/performance.md,
*Issue 32*, "The torch engine at PyTorch's speed").

    python -m tests.bench.torch_vs_pytorch resnet --steps 2 --rounds 5
    python -m tests.bench.torch_vs_pytorch lenet --steps 20 --threads 1
    python -m tests.bench.torch_vs_pytorch transformer --steps 5 --rounds 9 --compiled

``--compiled`` adds PyTorch's same step with its forward through ``torch.compile`` (inductor, its default mode;
AOTAutograd compiles the backward with it, the optimizer stays eager), the issue's "run eagerly or through
``torch.compile``, whichever measures faster", and prints its first step's time (the compile).

``--aten N`` then runs N more steps of the engine and of PyTorch's step under ``torch.profiler`` and prints, per
ATen operator, the time it spent itself and its calls, a step of each, the largest differences first, and the two
steps' wall and ATen totals: where the engine's step parts from PyTorch's (design_docs/performance.md, *The
seventeenth stop*: the same ATen time, the gap being the Python between the calls and the finiteness sums).

    python -m tests.bench.torch_vs_pytorch lenet --steps 20 --rounds 5 --aten 100
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import time
from typing import Callable

from .cases import block_medians


def _workloads(folder: str):
    spec = importlib.util.spec_from_file_location("anchors_workloads", os.path.join(folder, "wl.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _engine_step(wl, workload: str, threads: int) -> Callable[[], object]:
    from gradgen.framework import Executor, Scope
    params, x, y, lr = wl.DATA[workload]()
    main, startup, loss, feed, values = wl.gg_build(workload, params, x, y, lr)
    exe, scope = Executor(backend="torch", threads=threads), Scope()
    exe.run(startup, scope=scope)
    for name, value in values.items():
        scope.set(name, value.copy())
    return lambda: exe.run(main, feed=feed, fetch_list=[loss], scope=scope)


def _pytorch_step(wl, workload: str, threads: int, compiled: bool = False) -> Callable[[], object]:
    """wl.py's PyTorch step at ``threads``; ``compiled``: its forward (the closure ``fwd`` the step calls) through
    ``torch.compile``, as a user would compile the model and keep the loop."""
    import torch
    params, x, y, lr = wl.DATA[workload]()
    step, _, _ = wl.setup_torch(workload, params, x, y, lr)
    if compiled:
        cells = dict(zip(step.__code__.co_freevars, step.__closure__))
        cells["fwd"].cell_contents = torch.compile(cells["fwd"].cell_contents)
    own = torch.get_num_threads()

    def run():
        torch.set_num_threads(threads)
        try:
            return step()
        finally:
            torch.set_num_threads(own)

    return run


def _aten_times(step: Callable[[], object], steps: int) -> tuple[float, dict[str, tuple[float, float]]]:
    """The wall ms a step of ``steps`` under ``torch.profiler``, and per ATen operator (ms, calls) a step."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            step()
        wall = (time.perf_counter() - start) / steps * 1e3
    return wall, {e.key: (e.self_cpu_time_total / steps / 1e3, e.count / steps)
                  for e in prof.key_averages() if e.key.startswith("aten::")}


def _print_aten(engine: tuple, pytorch: tuple, rows: int = 30) -> None:
    (engine_wall, ours), (pytorch_wall, theirs) = engine, pytorch
    names = sorted(set(ours) | set(theirs), key=lambda k: -abs(ours.get(k, (0, 0))[0] - theirs.get(k, (0, 0))[0]))
    print(f"{'ATen operator, a step':44s} {'engine ms':>10s} {'calls':>6s} {'pytorch ms':>11s} {'calls':>6s}")
    for name in names[:rows]:
        (a, n), (b, m) = ours.get(name, (0.0, 0.0)), theirs.get(name, (0.0, 0.0))
        print(f"{name:44s} {a:10.3f} {n:6.1f} {b:11.3f} {m:6.1f}")
    print(f"{'all ATen operators':44s} {sum(v[0] for v in ours.values()):10.3f} {'':6s} "
          f"{sum(v[0] for v in theirs.values()):11.3f}")
    print(f"{'wall, under the profiler':44s} {engine_wall:10.3f} {'':6s} {pytorch_wall:11.3f}")


def main() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=["lenet", "resnet", "transformer"])
    parser.add_argument("--anchors", default=os.path.join(here, "..", "..", "..", "shared", "anchors", "workloads"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10, help="steps per block")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--compiled", action="store_true", help="add PyTorch's step with a torch.compile'd forward")
    parser.add_argument("--aten", type=int, default=0, metavar="N",
                        help="then profile N steps of each and compare their ATen operators")
    args = parser.parse_args()
    wl = _workloads(args.anchors)
    steps = {"engine": _engine_step(wl, args.workload, args.threads),
             "pytorch": _pytorch_step(wl, args.workload, args.threads)}
    if args.compiled:
        steps["compiled"] = _pytorch_step(wl, args.workload, args.threads, compiled=True)
        start = time.perf_counter()
        steps["compiled"]()
        print(f"compiled: first step (the compile) {time.perf_counter() - start:.1f} s", flush=True)
    medians = block_medians(steps, args.rounds, args.steps)
    print(f"{args.workload}, {args.threads} thread(s), load {os.getloadavg()[0]:.2f}: " +
          ", ".join(f"{name} {medians[name]:.2f} ms" for name in steps) +
          f"; engine / pytorch {medians['engine'] / medians['pytorch']:.2f}" +
          (f", compiled / pytorch {medians['compiled'] / medians['pytorch']:.2f}" if args.compiled else ""))
    if args.aten:
        _print_aten(_aten_times(steps["engine"], args.aten), _aten_times(steps["pytorch"], args.aten))


if __name__ == "__main__":
    main()
