"""An engine's tables, op type -> entry, gathered from its family modules the one way every engine gathers them:
the numpy kernels (``numpy/kernels/__init__.py``) and the xla lowerings (``xla/lowerings/__init__.py``) alike."""
from __future__ import annotations

from types import ModuleType
from typing import Any, Iterable

__all__ = ["collect"]


def collect(families: Iterable[ModuleType], table_name: str) -> dict[str, Any]:
    """The entries of every family module's dict ``table_name`` (a module without one has none), merged; a
    RuntimeError when two families have an entry for one op type."""
    table: dict[str, Any] = {}
    for family in families:
        for op_type, entry in getattr(family, table_name, {}).items():
            if op_type in table:
                raise RuntimeError(f"op type '{op_type}' has two {table_name} entries ({family.__name__})")
            table[op_type] = entry
    return table
