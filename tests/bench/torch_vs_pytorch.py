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
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import time
from typing import Callable


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


def main() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=["lenet", "resnet", "transformer"])
    parser.add_argument("--anchors", default=os.path.join(here, "..", "..", "..", "shared", "anchors", "workloads"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10, help="steps per block")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--compiled", action="store_true", help="add PyTorch's step with a torch.compile'd forward")
    args = parser.parse_args()
    wl = _workloads(args.anchors)
    steps = {"engine": _engine_step(wl, args.workload, args.threads),
             "pytorch": _pytorch_step(wl, args.workload, args.threads)}
    if args.compiled:
        steps["compiled"] = _pytorch_step(wl, args.workload, args.threads, compiled=True)
        start = time.perf_counter()
        steps["compiled"]()
        print(f"compiled: first step (the compile) {time.perf_counter() - start:.1f} s", flush=True)
    for step in steps.values():
        for _ in range(3):
            step()
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.rounds):
        for name, step in steps.items():
            start = time.perf_counter()
            for _ in range(args.steps):
                step()
            times[name].append((time.perf_counter() - start) / args.steps * 1e3)
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"{args.workload}, {args.threads} thread(s), load {os.getloadavg()[0]:.2f}: " +
          ", ".join(f"{name} {medians[name]:.2f} ms" for name in steps) +
          f"; engine / pytorch {medians['engine'] / medians['pytorch']:.2f}" +
          (f", compiled / pytorch {medians['compiled'] / medians['pytorch']:.2f}" if args.compiled else ""))


if __name__ == "__main__":
    main()
