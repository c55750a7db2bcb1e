"""Comparison and selection layers; comparisons, argmax and one_hot carry no gradient."""
from __future__ import annotations

from ..dtypes import normalize_dtype
from ..variable import Variable
from .creation import as_operands
from .helper import append, check_var
from .naming import named


@named
def where(cond: Variable, x, y, name=None) -> Variable:
    """x where ``cond`` holds, else y (all three broadcast)."""
    x, y = as_operands(x, y)
    return append("where", {"Condition": check_var(cond, "cond"), "X": x, "Y": y}, name=name)


def _compare(op_type: str):
    def layer(x, y, name=None) -> Variable:
        x, y = as_operands(x, y)
        return append(op_type, {"X": x, "Y": y}, name=name, stop_gradient=True)

    layer.__name__ = op_type
    layer.__doc__ = f"Elementwise {op_type}(x, y) as bool, with broadcasting (logical ones take bools)."
    return named(layer)


less_than = _compare("less_than")
less_equal = _compare("less_equal")
greater_than = _compare("greater_than")
greater_equal = _compare("greater_equal")
equal = _compare("equal")
not_equal = _compare("not_equal")
logical_and = _compare("logical_and")
logical_or = _compare("logical_or")
logical_xor = _compare("logical_xor")


@named
def logical_not(x: Variable, name=None) -> Variable:
    """Elementwise not of bool ``x``."""
    return append("logical_not", {"X": check_var(x, "x")}, name=name, stop_gradient=True)


@named
def argmax(x: Variable, axis: int, keep_dim: bool = False, name=None) -> Variable:
    return append("argmax", {"X": check_var(x, "x")}, {"axis": axis, "keep_dim": keep_dim}, name=name,
                  stop_gradient=True)


@named
def argmin(x: Variable, axis: int, keep_dim: bool = False, name=None) -> Variable:
    """The int64 index of the smallest value along ``axis`` (the first one on ties)."""
    return append("argmin", {"X": check_var(x, "x")}, {"axis": axis, "keep_dim": keep_dim}, name=name,
                  stop_gradient=True)


@named
def one_hot(x: Variable, depth: int, dtype="float32", name=None) -> Variable:
    return append("one_hot", {"X": check_var(x, "x")}, {"depth": depth, "dtype": normalize_dtype(dtype)}, name=name,
                  stop_gradient=True)


__all__ = [
    "where", "less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal", "argmax", "argmin",
    "one_hot", "logical_and", "logical_or", "logical_xor", "logical_not"
]
