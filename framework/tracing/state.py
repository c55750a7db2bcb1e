"""The state a function keeps between calls: its persistable vars (parameters, optimizer moments) in one scope.

Each new trace's startup program initializes what the scope lacks and leaves the rest alone, so parameters
trained through one signature's program are the ones the next signature's program reads. A var the scope holds
with another dtype or shape than the new program declares is an error that names the arguments whose change
caused it, rather than a silent re-initialization or a cast.
"""
from __future__ import annotations

from typing import Any

from gradgen.program import Program
from gradgen.program.shapes import format_shape

from ..errors import FunctionError
from ..runtime.scope import Scope
from .signature import Signature, changes

__all__ = ["check_agrees", "initialize"]


def _declared(startup: Program) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Persistable var name -> (dtype, shape) of what ``startup`` initializes."""
    return {name: (var.dtype, tuple(var.shape)) for name, var in startup.global_block().vars.items()
            if var.persistable}


def check_agrees(scope: Scope, startup: Program, made_by: dict[str, Signature], signature: Signature,
                 where: str) -> None:
    """Raise unless every var ``startup`` initializes and ``scope`` already holds has the same dtype and shape."""
    for name, (dtype, shape) in _declared(startup).items():
        held = scope.get(name)
        if held is None or (held.dtype.name, tuple(held.shape)) == (dtype, shape):
            continue
        before = made_by.get(name)
        made = (f"made by the call ({before})" if before is not None else "not made by a call of this function")
        changed = "; ".join(changes(before, signature)) if before is not None else str(signature)
        raise FunctionError(
            f"{where}: '{name}' in its scope is {held.dtype.name}{format_shape(held.shape)}, {made}, but this "
            f"call ({changed}) declares it {dtype}{format_shape(shape)}; call it with the arguments as before, or "
            f"use a new gradgen.framework.function for these")


def initialize(scope: Scope, startup: Program, executor: Any) -> list[str]:
    """Run ``startup`` and keep, in ``scope``, the vars it made that ``scope`` did not hold; their names."""
    fresh = Scope()
    executor.run(startup, scope=fresh)
    new = {name: fresh[name] for name in fresh if name not in scope}
    scope.update(new)
    return list(new)
