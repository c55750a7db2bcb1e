"""Places: where a program runs. The numpy backend runs on the CPU; a compiled backend can run on a GPU.

Paddle code writes ``Executor(CPUPlace())`` (or ``Executor("cpu")`` in
Paddle 2); both are accepted, and ``CUDAPlace(0)`` (``"gpu"``, ``"gpu:1"``) with a
compiled backend: ``Executor(CUDAPlace(0), backend="xla")``. Anything else is
an error rather than being taken for the executor's next argument.
"""
from __future__ import annotations

from typing import Any

from ..errors import ExecutionError

__all__ = ["CPUPlace", "CUDAPlace", "check_place"]


class CPUPlace:
    """The host CPU: the place every gradgen program runs."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CPUPlace)

    def __hash__(self) -> int:
        return hash(CPUPlace)

    def __repr__(self) -> str:
        return "CPUPlace()"


class CUDAPlace:
    """GPU number ``device_id``: runs there on a compiled backend whose engine has a GPU build installed."""

    def __init__(self, device_id: int = 0):
        if not isinstance(device_id, int) or isinstance(device_id, bool) or device_id < 0:
            raise ExecutionError(f"CUDAPlace needs a device number >= 0, got {device_id!r}")
        self.device_id = device_id

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CUDAPlace) and other.device_id == self.device_id

    def __hash__(self) -> int:
        return hash((CUDAPlace, self.device_id))

    def __repr__(self) -> str:
        return f"CUDAPlace({self.device_id})"


def check_place(place: Any) -> "CPUPlace | CUDAPlace":
    """``place`` as a CPUPlace or CUDAPlace: None, a place, ``"cpu"``, ``"gpu"`` or ``"gpu:N"``; else an
    ExecutionError."""
    if place is None or isinstance(place, CPUPlace):
        return CPUPlace()
    if isinstance(place, CUDAPlace):
        return place
    if isinstance(place, str) and place.strip().lower() == "cpu":
        return CPUPlace()
    if isinstance(place, str) and place.strip().lower().split(":")[0] == "gpu":
        number = place.strip().partition(":")[2] or "0"
        if number.isdigit():
            return CUDAPlace(int(number))
    hint = " (the check flags are keyword-only: Executor(check_nan_inf=True))" if isinstance(place, bool) else ""
    raise ExecutionError(f"Executor place must be gradgen.framework.CPUPlace() or 'cpu', or CUDAPlace(N) or 'gpu:N' "
                         f"with a compiled backend, got {place!r}{hint}")
