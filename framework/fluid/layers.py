"""``fluid.layers``: gradgen's layers, plus Paddle 1.x's ``data``, its ``[1]``-shaped ``mean``, the
``elementwise_*`` family with Paddle's ``axis`` and ``act``, ``mul`` with its ``num_col_dims``, and the
in-place writers Paddle's ``While`` bodies use (``assign(input, output)``, ``increment(in_place=True)``,
``less_than(cond=)``), with ``While`` itself (``control_flow``), and 1.x's ``argsort`` (values and indices).

``mean`` is the one reduction Paddle 1.x code indexes as ``avg_cost[0]``; every
other layer (``accuracy`` included) keeps gradgen's shapes, so a scalar
metric is 0-d and ``float(acc)`` works on every numpy.
"""
from __future__ import annotations

from math import prod
from typing import Sequence

from gradgen.program import layers as _layers
from gradgen.program.errors import ProgramError
from gradgen.program.layers.creation import as_operands
from gradgen.program.layers.helper import append, append_into, check_var
from gradgen.program.layers import *  # noqa: F401,F403  (the facade re-exports every layer under its own name)
from gradgen.program.variable import Variable

from .control_flow import While


def data(name: str, shape: Sequence[int | None], dtype="float32", append_batch_size: bool = True) -> Variable:
    """Paddle 1.x's ``fluid.layers.data``: a batch dim -1 goes in front unless the shape already has a None or -1."""
    shape = list(shape)
    if append_batch_size and all(d is not None and d >= 0 for d in shape):
        shape = [-1] + shape
    return _layers.data(name, shape, dtype)


def mean(x: Variable, name=None) -> Variable:
    """The mean of every element, shaped ``[1]`` as in Paddle 1.x (gradgen's ``layers.mean`` gives a 0-d scalar)."""
    return _layers.reshape(_layers.mean(x), [1], name=name)


def _elementwise(combine, x: Variable, y: Variable, axis: int, act: str | None, name) -> Variable:
    """Paddle's broadcast: ``y``'s dims line up with ``x``'s from dim ``axis`` on (-1: the trailing dims)."""
    if axis != -1 and len(y.shape) < len(x.shape):
        if not 0 <= axis <= len(x.shape) - len(y.shape):
            raise ProgramError(f"elementwise axis {axis} does not place y{list(y.shape)} inside x{list(x.shape)}")
        y = _layers.reshape(y, list(y.shape) + [1] * (len(x.shape) - axis - len(y.shape)))
    if not act:
        return combine(x, y, name=name)
    return getattr(_layers, act)(combine(x, y), name=name)


def elementwise_add(x: Variable, y: Variable, axis: int = -1, act: str | None = None, name=None) -> Variable:
    """x + y, ``y`` broadcast from dim ``axis`` of ``x``, then the activation ``act`` if given."""
    return _elementwise(_layers.add, x, y, axis, act, name)


def elementwise_sub(x: Variable, y: Variable, axis: int = -1, act: str | None = None, name=None) -> Variable:
    return _elementwise(_layers.subtract, x, y, axis, act, name)


def elementwise_mul(x: Variable, y: Variable, axis: int = -1, act: str | None = None, name=None) -> Variable:
    return _elementwise(_layers.multiply, x, y, axis, act, name)


def elementwise_div(x: Variable, y: Variable, axis: int = -1, act: str | None = None, name=None) -> Variable:
    return _elementwise(_layers.divide, x, y, axis, act, name)


def mul(x: Variable, y: Variable, x_num_col_dims: int = 1, y_num_col_dims: int = 1, name=None) -> Variable:
    """Paddle's ``mul``: ``x`` flattened to a matrix at ``x_num_col_dims``, ``y`` at ``y_num_col_dims``,
    multiplied; the result has ``x``'s first ``x_num_col_dims`` dims and ``y``'s dims after ``y_num_col_dims``."""
    x_cols, y_rows, y_cols = x.shape[x_num_col_dims:], y.shape[:y_num_col_dims], y.shape[y_num_col_dims:]
    lead = list(x.shape[:x_num_col_dims])
    if -1 in x_cols or -1 in y.shape or lead.count(-1) > 1:
        raise ProgramError(f"mul: x{list(x.shape)} may have one unknown dim, among its first {x_num_col_dims}, "
                           f"and y{list(y.shape)} none")
    if prod(x_cols) != prod(y_rows):
        raise ProgramError(f"mul: x{list(x.shape)} flattened at {x_num_col_dims} has {prod(x_cols)} columns but "
                           f"y{list(y.shape)} flattened at {y_num_col_dims} has {prod(y_rows)} rows")
    product = _layers.matmul(_layers.reshape(x, [-1, prod(x_cols)]), _layers.reshape(y, [prod(y_rows), -1]))
    return _layers.reshape(product, lead + list(y_cols), name=name)


def assign(input: Variable, output: Variable | None = None) -> Variable:
    """``output = input`` (a new var when ``output`` is None), under Paddle's argument names."""
    return _layers.assign(input, output)


def increment(x: Variable, value: float = 1.0, in_place: bool = True) -> Variable:
    """``x + value`` for a one-element ``x``, written into ``x`` itself when ``in_place`` (Paddle's default)."""
    if any(d != 1 for d in x.shape):
        raise ProgramError(f"increment needs a one-element x, got '{x.name}' {x.type_str()}")
    if in_place:
        return append_into("increment", {"X": x}, x, {"step": float(value)})
    return append("increment", {"X": x}, {"step": float(value)})


def less_than(x: Variable, y: Variable, force_cpu=None, cond: Variable | None = None, name=None) -> Variable:
    """``x < y`` as bool, written into ``cond`` when given (how a Paddle ``While`` body updates its condition)."""
    if cond is None:
        return _layers.less_than(x, y, name=name)
    x, y = as_operands(x, y)
    out = append_into("less_than", {"X": x, "Y": y}, cond)
    out.stop_gradient = True  # a comparison carries no gradient, as layers.less_than's own output
    return out


def argsort(input: Variable, axis: int = -1, descending: bool = False, name=None) -> tuple[Variable, Variable]:
    """Paddle 1.x's ``fluid.layers.argsort``: the sorted values and their int64 indices, from one ``sort`` op
    (gradgen's ``layers.argsort`` gives the indices alone, as Paddle 2 does)."""
    values, indices = append("sort", {"X": check_var(input, "input")}, {"axis": axis, "descending": descending},
                             out_slots=("Out", "Indices"), name=name)
    indices.stop_gradient = True
    return values, indices


__all__ = list(_layers.__all__) + ["elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div",
                                  "mul", "increment", "While"]
