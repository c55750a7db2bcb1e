"""gradgen's engine: passes over programs, the runtime that runs them, and the tools around both.

    from gradgen.framework import Executor, append_backward, gradients, optimizer
    from gradgen.framework import function     # a Python function of layers -> a cached program (tracing/)

The folders are the architecture: ``passes/`` (programs -> programs: the backward pass,
recompute, data parallel), ``runtime/`` (the executor, the scope, the commit), ``backend/`` (one folder
per engine, alike: ``numpy/`` with its kernels by family and its plans; ``xla/`` with its lowerings by the same
families and its compile cache; ``shared/`` with what every backend shares: the run's names, conformance, loop
read-back, the op helpers both engines use) and ``tools/``
(the ``gradgen`` command, summaries, memory reports, gradient checks, examples).
Training on many MPI processes: ``init_parallel``, ``data_parallel``, ``shard_feed``,
``save_params_on_rank0`` (design_docs/distributed.md).

The names below load on first use, so ``gradgen --help`` starts without numpy's
friends (networkx, scipy) that only the passes and kernels need.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

from gradgen.program.display import install_page_builder

_PUBLIC = {
    "append_backward": ".passes.backward",
    "gradients": ".passes.backward",
    "forward_gradients": ".passes.forward",
    "check_custom_gradient": ".tools.custom_gradients",
    "register_op": ".user_ops",
    "unregister_op": ".user_ops",
    "Executor": ".runtime.executor",
    "function": ".tracing",
    "Function": ".tracing",
    "backends": ".backend",
    "CPUPlace": ".runtime.place",
    "CUDAPlace": ".runtime.place",
    "PlanOptions": ".backend.numpy",
    "Scope": ".runtime.scope",
    "global_scope": ".runtime.scope",
    "scope_guard": ".runtime.scope",
    "prune": ".passes.prune",
    "save_inference_model": ".inference",
    "load_inference_model": ".inference",
    "DataFeeder": ".data",
    "DataLoader": ".data",
    "ExecutionError": ".errors",
    "FeedError": ".errors",
    "NanInfError": ".errors",
    "BackwardError": ".errors",
    "ForwardError": ".errors",
    "FunctionError": ".errors",
    "ParamFileError": ".errors",
    "data_parallel": ".passes.data_parallel",
    "init_parallel": ".runtime.communicator",
    "communicator": ".runtime.communicator",
    "shard_feed": ".distributed",
    "save_params_on_rank0": ".distributed",
    "DistributedError": ".errors",
    "export_onnx": ".tools.onnx",
    "import_onnx": ".tools.onnx",
    "io": None,
    "fluid": None,
    "paddle": None,
    "optimizer": None,
}
"""Public name -> the module that defines it (None: the name is a submodule of this package)."""

__all__ = list(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    where = _PUBLIC[name]
    value = import_module(f".{name}", __name__) if where is None else getattr(import_module(where, __name__), name)
    globals()[name] = value
    return value


def _explain_page(program, **options: Any) -> str:
    """``Program.explain``'s builder: the page module loads on first use."""
    return import_module(".tools.explain", __name__).explain_page(program, **options)


install_page_builder(_explain_page)  # Program.explain and Program._repr_html_ (see program/display.py)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
