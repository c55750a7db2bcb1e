"""Layers that read or write elements at integer positions: scatter, scatter_add, take_along_axis, top_k, sort
and argsort."""
from __future__ import annotations

from ..variable import Variable
from .helper import append, check_var
from .naming import named


def _scatter(op_type: str, x: Variable, index: Variable, updates: Variable, axis: int, name) -> Variable:
    return append(op_type, {"X": check_var(x, "x"), "Index": check_var(index, "index"),
                            "Updates": check_var(updates, "updates")}, {"axis": axis}, name=name)


@named
def scatter(x: Variable, index: Variable, updates: Variable, axis: int = 0, name=None) -> Variable:
    """x with its slices at ``index`` along ``axis`` replaced by ``updates`` (shaped like ``gather(x, index)``).

    An index repeated at run time is an error: which update would win is undefined (use ``scatter_add``).
    """
    return _scatter("scatter", x, index, updates, axis, name)


@named
def scatter_add(x: Variable, index: Variable, updates: Variable, axis: int = 0, name=None) -> Variable:
    """x with ``updates`` (shaped like ``gather(x, index)``) added at ``index`` along ``axis``; repeats add up."""
    return _scatter("scatter_add", x, index, updates, axis, name)


@named
def take_along_axis(x: Variable, index: Variable, axis: int, name=None) -> Variable:
    """numpy's ``take_along_axis``: x's elements at ``index`` along ``axis``, index shaped like x elsewhere."""
    return append("take_along_axis", {"X": check_var(x, "x"), "Index": check_var(index, "index")}, {"axis": axis},
                  name=name)


@named
def top_k(x: Variable, k: int, axis: int = -1, largest: bool = True, name=None) -> tuple[Variable, Variable]:
    """The ``k`` largest (smallest) values along ``axis``, sorted, and their int64 indices (ties: lower index)."""
    values, indices = append("top_k", {"X": check_var(x, "x")}, {"k": k, "axis": axis, "largest": largest},
                             out_slots=("Out", "Indices"), name=name)
    indices.stop_gradient = True
    return values, indices


@named
def sort(x: Variable, axis: int = -1, descending: bool = False, name=None) -> Variable:
    """x sorted along ``axis``; stable (equal values keep their order), descending too. Its gradient goes back
    to the positions the values came from."""
    values, indices = append("sort", {"X": check_var(x, "x")}, {"axis": axis, "descending": descending},
                             out_slots=("Out", "Indices"), name=name)
    indices.stop_gradient = True
    return values


@named
def argsort(x: Variable, axis: int = -1, descending: bool = False, name=None) -> Variable:
    """The int64 positions that sort x along ``axis`` (stable in both directions); no gradient."""
    return append("argsort", {"X": check_var(x, "x")}, {"axis": axis, "descending": descending},
                  out_slots=("Indices",), name=name, stop_gradient=True)


__all__ = ["scatter", "scatter_add", "take_along_axis", "top_k", "sort", "argsort"]
