"""Matrix product layers."""
from __future__ import annotations

from ..variable import Variable
from .helper import append, check_var


def matmul(x: Variable, y: Variable, transpose_x: bool = False, transpose_y: bool = False, name=None) -> Variable:
    """Batched x @ y over the last two dims (optionally transposed); batch dims broadcast."""
    return append("matmul", {"X": check_var(x, "x"), "Y": check_var(y, "y")},
                  {"transpose_x": transpose_x, "transpose_y": transpose_y}, name=name)


__all__ = ["matmul"]
