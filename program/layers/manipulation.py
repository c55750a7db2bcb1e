"""Layers that reshape, reorder, join and split tensors."""
from __future__ import annotations

from typing import Sequence

from ..errors import ProgramError
from ..variable import Variable
from .helper import append, check_var


def sum(xs: Sequence[Variable], name=None) -> Variable:
    """xs[0] + xs[1] + ... for vars of one shape."""
    xs = list(xs)
    if not xs:
        raise ProgramError("sum needs at least one var")
    return append("sum", {"X": [check_var(x, "xs[i]") for x in xs]}, name=name)


def broadcast_to(x: Variable, shape: Sequence[int], name=None) -> Variable:
    return append("broadcast_to", {"X": check_var(x, "x")}, {"shape": list(shape)}, name=name)
