"""gradgen's engine: passes over programs, the runtime that runs them, and the tools around both.

    from gradgen.framework import Executor, append_backward, gradients, optimizer

The folders are the architecture: ``passes/`` (programs -> programs: the backward pass,
recompute), ``runtime/`` (kernels, plans, buffers, the executor and scope) and ``tools/``
(the ``gradgen`` command, summaries, memory reports, gradient checks, examples).

The names below load on first use, so ``gradgen --help`` starts without numpy's
friends (networkx, scipy) that only the passes and kernels need.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

_PUBLIC = {
    "append_backward": ".passes.backward",
    "gradients": ".passes.backward",
    "forward_gradients": ".passes.forward",
    "check_custom_gradient": ".tools.custom_gradients",
    "register_op": ".user_ops",
    "unregister_op": ".user_ops",
    "Executor": ".runtime.executor",
    "PlanOptions": ".runtime.plan_data",
    "Scope": ".runtime.scope",
    "global_scope": ".runtime.scope",
    "ExecutionError": ".errors",
    "FeedError": ".errors",
    "NanInfError": ".errors",
    "BackwardError": ".errors",
    "ForwardError": ".errors",
    "ParamFileError": ".errors",
    "io": None,
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


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
