"""One workload on one system in a process of its own; prints its losses and step times as one JSON line.

    python -m tests.gpu.one_run SYSTEM WORKLOAD --device gpu --steps 30 --warmup 3
    python -m tests.gpu.one_run --preflight --device gpu

SYSTEM is ``reference`` (gradgen's numpy interpreter, always on the CPU), ``gradgen`` (``Executor(place,
backend="xla")``, ``CUDAPlace(0)`` on the GPU), ``jax`` or ``torch``. On ``--device gpu`` a system whose engine
sees no GPU stops with a message saying so (exit status 3); nothing falls back to the CPU. ``--preflight`` asks
jax and torch what they see and stops the same way when either sees no GPU.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from .workloads import NAMES, make

__all__ = ["SYSTEMS", "main"]

SYSTEMS = ("reference", "gradgen", "jax", "torch")
NO_GPU = 3


def _no_gpu(message: str) -> SystemExit:
    print(f"{message}; the GPU check does not fall back to the CPU (run it with --cpu for that)",
          file=sys.stderr)
    return SystemExit(NO_GPU)


def _jax_device(gpu: bool):
    try:
        import jax
    except ModuleNotFoundError:
        raise _no_gpu(f"jax is not installed for {sys.executable}") from None

    if not gpu:
        return jax.devices("cpu")[0]
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if not gpus:
        raise _no_gpu(f"jax {jax.__version__} sees no GPU (its devices: {jax.devices()}); install its CUDA "
                      "build, e.g. pip install 'jax[cuda13]'")
    return gpus[0]


def _torch_device(gpu: bool) -> str:
    try:
        import torch
    except ModuleNotFoundError:
        raise _no_gpu(f"torch is not installed for {sys.executable}") from None

    if not gpu:
        return "cpu"
    if not torch.cuda.is_available():
        raise _no_gpu(f"torch {torch.__version__} sees no GPU (built for CUDA {torch.version.cuda}); install "
                      "a CUDA build, e.g. pip install torch==2.14.1 on x86_64 Linux")
    return "cuda:0"


def preflight(gpu: bool) -> dict:
    """What jax and torch run on: the device each will use, and their versions."""
    jax_device, torch_device = _jax_device(gpu), _torch_device(gpu)
    import jax
    import torch

    name = torch.cuda.get_device_name(0) if gpu else "CPU"
    return {"jax": f"jax {jax.__version__} on {jax_device.device_kind}", "torch": f"torch {torch.__version__}"
            f" on {name}", "device": name}


def _make_step(system: str, workload: str, gpu: bool):
    wl = make(workload)
    if system == "reference":
        from .gradgen_models import gradgen_step
        return gradgen_step(wl, None, "numpy"), "gradgen's numpy reference on the CPU"
    if system == "gradgen":
        from gradgen.framework import CUDAPlace

        from .gradgen_models import gradgen_step
        device = _jax_device(gpu)
        return (gradgen_step(wl, CUDAPlace(0) if gpu else None, "xla", feed_device=device),
                f"gradgen's xla engine (jax {_version('jax')}) on {device.device_kind}")
    if system == "jax":
        from .jax_models import jax_step
        device = _jax_device(gpu)
        return jax_step(wl, device), f"JAX {_version('jax')} on {device.device_kind}"
    from .torch_models import torch_step
    device = _torch_device(gpu)
    return torch_step(wl, device), f"PyTorch {_version('torch')} on {device}"


def _version(module: str) -> str:
    return sys.modules[module].__version__


def run(system: str, workload: str, gpu: bool, steps: int, warmup: int) -> dict:
    """``warmup + steps`` training steps: every step's loss, and the last ``steps`` steps' times in ms."""
    started = time.perf_counter()
    step, where = _make_step(system, workload, gpu)
    losses, ms = [], []
    for index in range(warmup + steps):
        begin = time.perf_counter()
        losses.append(step())
        if index >= warmup:
            ms.append((time.perf_counter() - begin) * 1e3)
    return {"system": system, "workload": workload, "where": where, "losses": losses, "ms": ms,
            "seconds": time.perf_counter() - started}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.gpu.one_run", description=__doc__.split("\n")[0])
    parser.add_argument("system", nargs="?", choices=SYSTEMS)
    parser.add_argument("workload", nargs="?", choices=NAMES)
    parser.add_argument("--device", choices=("cpu", "gpu"), default="gpu")
    parser.add_argument("--steps", type=int, default=30, help="timed steps")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (the compile among them)")
    parser.add_argument("--preflight", action="store_true", help="only say what jax and torch run on")
    args = parser.parse_args(argv)
    gpu = args.device == "gpu"
    if args.preflight:
        print(json.dumps(preflight(gpu)))
        return
    if args.system is None or args.workload is None:
        parser.error("name a SYSTEM and a WORKLOAD, or pass --preflight")
    print(json.dumps(run(args.system, args.workload, gpu, args.steps, args.warmup)))


if __name__ == "__main__":
    main()
