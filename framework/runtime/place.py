"""Places: where a program runs. gradgen runs on numpy, so the CPU is the only place.

Paddle code writes ``Executor(CPUPlace())`` (or ``Executor("cpu")`` in
Paddle 2); both are accepted. Anything else is an error rather than being
taken for the executor's next argument.
"""
from __future__ import annotations

from typing import Any

from ..errors import ExecutionError

__all__ = ["CPUPlace", "check_place"]


class CPUPlace:
    """The host CPU: the place every gradgen program runs."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CPUPlace)

    def __hash__(self) -> int:
        return hash(CPUPlace)

    def __repr__(self) -> str:
        return "CPUPlace()"


def check_place(place: Any) -> CPUPlace:
    """``place`` as a CPUPlace: None, a CPUPlace or the string ``"cpu"``; else an ExecutionError."""
    if place is None or isinstance(place, CPUPlace):
        return CPUPlace()
    if isinstance(place, str) and place.strip().lower() == "cpu":
        return CPUPlace()
    hint = " (the check flags are keyword-only: Executor(check_nan_inf=True))" if isinstance(place, bool) else ""
    raise ExecutionError(f"Executor place must be gradgen.framework.CPUPlace() or 'cpu' (gradgen runs on numpy), "
                         f"got {place!r}{hint}")
