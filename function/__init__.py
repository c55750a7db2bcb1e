"""``gradgen.function``: ``gradgen.framework.function`` under the namespace's own name, callable as this module.

    from gradgen import function            # or: import gradgen.function, then gradgen.function(train_step)
    step = function(train_step, optimizer=optimizer.SGD(0.1))

``gradgen`` is a namespace package with no ``__init__`` of its own (pyproject.toml says why), so a name directly
under it must be a module; this one's class is a ``ModuleType`` whose call is ``gradgen.framework.function``
(Python's documented way to customize a module: assigning its ``__class__``). Attributes other than the call are
the wrapper's own (``Function``, ``Signature``).
"""
from __future__ import annotations

import sys
import types
from typing import Any

from gradgen.framework.tracing import Function, Input, Signature
from gradgen.framework.tracing import function as _function

__all__ = ["Function", "Input", "Signature"]


class _CallableModule(types.ModuleType):
    """A module that, called, is ``gradgen.framework.function``."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _function(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
