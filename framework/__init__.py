"""gradgen's engine: kernels, the executor and the scope (plus, from other modules, the backward pass)."""
from __future__ import annotations

from .backward import append_backward, gradients
from .errors import BackwardError, ExecutionError, FeedError, NanInfError
from .executor import Executor
from .scope import Scope, global_scope

__all__ = ["append_backward", "gradients", "Executor", "Scope", "global_scope", "ExecutionError", "FeedError", "NanInfError", "BackwardError"]

from . import io, optimizer  # noqa: E402  (modules, used as framework.optimizer.SGD)
