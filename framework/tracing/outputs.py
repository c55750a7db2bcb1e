"""What a traced function returned: its Variables in order (the fetches) and the structure to put values back in.

A function returns a Variable, or tuples, lists, named tuples and dicts of them, nested as deep as it likes.
``flatten`` keeps that structure with each Variable replaced by its position in the fetch list; ``rebuild``
puts the fetched arrays into those positions.
"""
from __future__ import annotations

from typing import Any, Sequence

from gradgen.program.variable import Variable

from ..errors import FunctionError

__all__ = ["flatten", "rebuild"]


def _walk(value: Any, path: str, where: str, found: list[Variable]) -> Any:
    if isinstance(value, Variable):
        found.append(value)
        return len(found) - 1
    if isinstance(value, dict):
        return {key: _walk(v, f"{path}[{key!r}]", where, found) for key, v in value.items()}
    if isinstance(value, (tuple, list)):
        items = [_walk(v, f"{path}[{k}]", where, found) for k, v in enumerate(value)]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    raise FunctionError(f"{where} returned {type(value).__name__} {value!r:.60} at {path or 'the top'}; it must return "
                        f"a Variable, or a tuple, list or dict of Variables (the values each call fetches)")


def flatten(returned: Any, where: str) -> tuple[list[Variable], Any]:
    """``(fetches, template)``: the returned Variables in order, and the structure with their positions in it."""
    found: list[Variable] = []
    template = _walk(returned, "", where, found)
    if not found:
        raise FunctionError(f"{where} returned no Variable; return the values each call should fetch (a loss, "
                            f"outputs)")
    return found, template


def rebuild(template: Any, values: Sequence[Any]) -> Any:
    """``template`` with each position replaced by the fetched value there."""
    if isinstance(template, int):
        return values[template]
    if isinstance(template, dict):
        return {key: rebuild(t, values) for key, t in template.items()}
    items = [rebuild(t, values) for t in template]
    return type(template)(*items) if hasattr(template, "_fields") else type(template)(items)
