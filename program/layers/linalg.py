"""Matrix product layers: matmul and einsum."""
from __future__ import annotations

from ..errors import ProgramError
from ..variable import Variable
from .helper import append, check_var
from .naming import named


@named
def matmul(x: Variable, y: Variable, transpose_x: bool = False, transpose_y: bool = False, name=None) -> Variable:
    """Batched x @ y over the last two dims (optionally transposed); batch dims broadcast."""
    return append("matmul", {"X": check_var(x, "x"), "Y": check_var(y, "y")},
                  {"transpose_x": transpose_x, "transpose_y": transpose_y}, name=name)


@named
def einsum(equation: str, *operands: Variable, name=None) -> Variable:
    """numpy's einsum, e.g. ``einsum("bij,bjk->bik", a, b)``: '...' and size-1 dims broadcast, and without '->'
    the result is the letters used once, in order; a letter repeated in one term (a trace) is refused."""
    if not operands:
        raise ProgramError("einsum needs at least one operand")
    return append("einsum", {"Operands": [check_var(x, f"operands[{k}]") for k, x in enumerate(operands)]},
                  {"equation": equation}, name=name)


__all__ = ["matmul", "einsum"]
