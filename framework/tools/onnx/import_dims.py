"""Shape vectors with dims known only at run time: what exporters' shape arithmetic computes on a dynamic batch.

``Shape`` of a var with -1 dims is not a constant, but most of its entries are: a ``Gather`` of a static
dim, a ``Slice`` of static dims, their ``Concat`` with constants, are known at import. A ``ShapeVector``
keeps each entry as a number, as ``Dim(var, axis)`` (the run-time size of one dim of a var) or as None
(computed from a run-time dim: ``batch * heads``). Nodes whose inputs are shape vectors and constants
(``VECTOR_OPS``) compute a shape vector, or a constant when every entry is known; a ``Reshape`` to one
takes it as its shape attr: a ``Dim`` of the reshaped var's own dim at the same place becomes gradgen's 0
(copy), and one remaining unknown entry becomes -1 (inferred). Nothing unknown is ever made a number.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from .errors import NotImportable
from .import_integer_rules import onnx_slice_range, wrapped

__all__ = ["Dim", "ShapeVector", "VECTOR_OPS", "of_shape", "evaluate", "reshape_target"]


class Dim(NamedTuple):
    """The run-time size of dim ``axis`` of gradgen var ``var``."""

    var: str
    axis: int


Entry = "int | float | Dim | None"


class ShapeVector(NamedTuple):
    """A rank-0 (``scalar``) or rank-1 integer value some of whose entries are known only at run time."""

    entries: tuple
    scalar: bool
    dtype: str = "int64"

    def known(self) -> bool:
        return all(isinstance(e, (int, float)) for e in self.entries)

    def value(self) -> np.ndarray:
        array = np.asarray(self.entries, dtype=self.dtype)
        return array.reshape(()) if self.scalar else array


def of_shape(shape: Sequence[int], var: str, start: int = 0, end: int | None = None) -> ShapeVector:
    """The ``Shape`` of ``var`` (dims -1 where unknown), entries ``start:end``."""
    entries = tuple(int(d) if d >= 0 else Dim(var, i) for i, d in enumerate(shape))
    return ShapeVector(entries[slice(start, end)], False)


def _vector(value) -> ShapeVector | None:
    """A shape vector, or a small integer constant as one; None for anything else."""
    if isinstance(value, ShapeVector):
        return value
    array = np.asarray(value)
    if array.ndim > 1 or array.dtype.kind not in "iu" or array.size > 64:
        return None
    return ShapeVector(tuple(int(v) for v in array.reshape(-1)), array.ndim == 0, array.dtype.name)


def _ints(v: ShapeVector, what: str) -> list[int]:
    if not v.known():
        raise NotImportable(f"{what} known only at run time")
    return [int(e) for e in v.entries]


def _gather(node, attrs, data, index):
    if data.scalar or attrs.get("axis", 0) not in (0, -1):
        raise NotImportable("a Gather of a shape along an axis other than 0")
    n = len(data.entries)
    picked = []
    for i in _ints(index, "the gathered positions"):
        if not -n <= i < n:
            raise NotImportable(f"position {i} of a shape of {n} dims")
        picked.append(data.entries[i])
    return ShapeVector(tuple(picked), index.scalar, data.dtype)


def _one(v: ShapeVector | None, what: str, default: int | None = None) -> int:
    """The one number of a Slice's starts, ends or steps (a shape vector is sliced along its only axis)."""
    if v is None and default is not None:
        return default
    values = _ints(v, what) if v is not None else []
    if len(values) != 1:
        raise NotImportable(f"{what} of a Slice of a shape vector must be one number, got {values}")
    return values[0]


def _slice(node, attrs, data, starts=None, ends=None, axes=None, steps=None):
    if data.scalar or _one(axes, "axes", 0) not in (0, -1):
        raise NotImportable("a Slice of a shape along an axis other than 0")
    start, end, step = _one(starts, "starts"), _one(ends, "ends"), _one(steps, "steps", 1)
    if step == 0:
        raise NotImportable("a slice step of 0")
    picked = onnx_slice_range(start, end, step, len(data.entries))
    return ShapeVector(tuple(data.entries[i] for i in picked), False, data.dtype)


def _unsqueeze(node, attrs, data, axes=None):
    axes = _ints(axes, "axes") if axes is not None else list(attrs.get("axes", []))
    if not data.scalar or axes not in ([0], [-1]):
        raise NotImportable("an Unsqueeze of a shape vector other than a scalar to one dim")
    return ShapeVector(data.entries, False, data.dtype)


def _squeeze(node, attrs, data, axes=None):
    if data.scalar or len(data.entries) != 1:
        raise NotImportable("a Squeeze of a shape vector of more than one entry")
    return ShapeVector(data.entries, True, data.dtype)


def _concat(node, attrs, *parts):
    if any(p.scalar for p in parts):
        raise NotImportable("a Concat of scalars")
    return ShapeVector(tuple(e for p in parts for e in p.entries), False, parts[0].dtype)


def _cast(node, attrs, data):
    from .import_checks import numpy_dtype

    dtype = numpy_dtype(attrs["to"])
    if dtype not in ("int32", "int64"):
        raise NotImportable(f"a shape vector cast to {dtype}")
    return ShapeVector(data.entries, data.scalar, dtype)


def _identity(node, attrs, data):
    return data


def _arithmetic(fn):
    """An elementwise integer op on two shape vectors (one may be a scalar or have one entry): an entry is
    known when both sides are; a ``Dim`` met by anything becomes None (its value is not a dim any more)."""
    def evaluate_(node, attrs, a, b):
        if len(a.entries) != len(b.entries) and 1 not in (len(a.entries), len(b.entries)):
            raise NotImportable(f"shape vectors of {len(a.entries)} and {len(b.entries)} entries")
        n = max(len(a.entries), len(b.entries))
        pick = lambda v, i: v.entries[0] if len(v.entries) == 1 else v.entries[i]  # noqa: E731
        out = []
        for i in range(n):
            x, y = pick(a, i), pick(b, i)
            out.append(wrapped(fn(x, y), a.dtype) if isinstance(x, int) and isinstance(y, int) else None)
        return ShapeVector(tuple(out), a.scalar and b.scalar, a.dtype)
    return evaluate_


def _truncated(x: int, y: int) -> int:
    if y == 0:
        raise NotImportable("an integer division of a shape by zero")
    q = abs(x) // abs(y)
    return q if (x >= 0) == (y > 0) else -q


VECTOR_OPS = {"Gather": _gather, "Slice": _slice, "Unsqueeze": _unsqueeze, "Squeeze": _squeeze, "Concat": _concat,
              "Cast": _cast, "Identity": _identity, "Add": _arithmetic(lambda x, y: x + y),
              "Sub": _arithmetic(lambda x, y: x - y), "Mul": _arithmetic(lambda x, y: x * y),
              "Div": _arithmetic(_truncated)}
"""ONNX op type -> ``fn(node, attrs, *inputs)`` on shape vectors (inputs absent at the end are left out)."""


def evaluate(node, attrs: dict, inputs: list) -> ShapeVector | None:
    """The shape vector ``node`` computes from ``inputs`` (shape vectors or constants; None where an input is
    neither), or None when it is not a shape computation (its inputs are not all shape vectors and small
    integer constants, or it has several outputs)."""
    if node.op_type not in VECTOR_OPS or len(node.output) != 1:
        return None
    vectors = [_vector(v) if v is not None else None for v in inputs]
    if any(v is None for v in vectors):
        return None
    return VECTOR_OPS[node.op_type](node, attrs, *vectors)


def reshape_target(entries: Sequence, x: str, x_rank: int) -> list[int]:
    """A ``Reshape`` of var ``x`` to a shape vector as gradgen's shape attr: known entries as they are,
    ``Dim(x, i)`` at place i as 0 (copy x's dim), one other unknown entry as -1; more is an error."""
    target = []
    for i, e in enumerate(entries):
        if isinstance(e, (int, np.integer)):
            target.append(int(e))
        elif isinstance(e, Dim) and e.var == x and e.axis == i and i < x_rank:
            target.append(0)
        else:
            target.append(-1)
    if target.count(-1) > 1:
        raise NotImportable(f"a shape with {target.count(-1)} entries known only at run time "
                            "(gradgen's reshape infers one)")
    return target
