"""ONNX's ``Range``: ``torch.arange`` in an export, the position ids of every ``transformers`` model.

All inputs constant: the values themselves, computed at import (integers exactly, in Python ints). A limit
that is one run-time dim (``Shape -> Gather`` of a var with a dynamic dim: ``arange(seq_len)``) with a
constant start >= 0 and step > 0: the integers 0 .. n - 1 made at run time as the exclusive running sum of
ones shaped like that dim, then sliced from ``start`` by ``step``. Anything else is refused by name.
"""
from __future__ import annotations

import numpy as np

from .errors import NotImportable
from .import_checks import check_size
from .import_dims import Dim

__all__ = ["range_"]

SUPPORTED = ("a Range's length must follow from shapes, not from values (gradgen's shapes come from the feeds' "
             "shapes), so its start and step must be constants and its limit a constant or one dim of a var "
             "(Shape -> Gather)")
"""What a refused Range is told it may be."""


def _count(start, limit, delta, integer: bool) -> int:
    """ONNX's number of elements: max(ceil((limit - start) / delta), 0); exact for integers."""
    if delta == 0:
        raise NotImportable(f"start {start}, limit {limit}, delta 0 (a Range step of 0 has no length)")
    n = -((start - limit) // delta) if integer else int(np.ceil((limit - start) / delta))
    return max(n, 0)


def _constant(ctx) -> None:
    dtype = ctx.const(0).dtype
    if any(ctx.const(k).dtype != dtype for k in (1, 2)):
        raise NotImportable(f"inputs of types {[ctx.const(k).dtype.name for k in range(3)]} (one type for all)")
    start, limit, delta = (ctx.scalar(k) for k in range(3))
    integer = dtype.kind in "iu"
    if not integer and not all(np.isfinite([start, limit, delta])):
        raise NotImportable(f"start {start}, limit {limit}, delta {delta} (finite numbers only)")
    n = _count(start, limit, delta, integer)
    check_size([n], dtype.itemsize, "the Range", ctx.importer.limits)
    if integer:
        values = start + delta * np.arange(n, dtype=np.int64)  # int64 arithmetic, exact for every value in range
    else:  # ONNX's definition, start + i * delta in the dtype (ONNX Runtime adds delta n times, drifting)
        values = dtype.type(start) + dtype.type(delta) * np.arange(n, dtype=dtype)
    ctx.bind_const(0, values.astype(dtype))


def range_(ctx) -> None:
    """Range -> a constant, or the integers of one run-time dim (see the module's docstring)."""
    if all(ctx.is_const(k) for k in range(3)):
        return _constant(ctx)
    run_time = [f"{what} '{ctx.node.input[k]}'" for k, what in enumerate(("start", "limit", "step"))
                if not ctx.is_const(k)]
    if len(run_time) > 1 or not run_time[0].startswith("limit"):
        listed = ", ".join(run_time[:-1]) + " and " + run_time[-1] if len(run_time) > 1 else run_time[0]
        raise NotImportable(f"{listed} known only at run time: {SUPPORTED}")
    vector = ctx.graph.lookup_vector(ctx.node.input[1])
    if vector is None or len(vector.entries) != 1 or not isinstance(vector.entries[0], Dim):
        raise NotImportable(f"{run_time[0]} computed at run time, not one dim of a var's shape: {SUPPORTED}")
    start, delta = ctx.scalar(0), ctx.scalar(2)
    if ctx.const(0).dtype.kind not in "iu" or ctx.const(2).dtype.kind not in "iu" or start < 0 or delta <= 0:
        raise NotImportable(f"start {start} and step {delta} with a run-time limit (integers, start >= 0, step > 0)")
    var, axis = vector.entries[0]
    rank = len(ctx.importer.block().var(var).shape)
    others = [a for a in range(rank) if a != axis]
    line = ctx.tmp("slice", {"X": var}, {"axes": others, "starts": [0] * len(others), "ends": [1] * len(others)})
    ones = ctx.tmp("fill_any_like", {"X": ctx.tmp("reshape", {"X": line}, {"shape": [-1]})},
                   {"value": 1, "dtype": "int64"})
    counted = ctx.tmp("cumsum", {"X": ones}, {"axis": 0, "exclusive": True})
    picked = counted if (start, delta) == (0, 1) else ctx.tmp(
        "slice", {"X": counted}, {"axes": [0], "starts": [int(start)], "ends": [2 ** 62], "strides": [int(delta)]})
    dtype = ctx.const(0).dtype.name
    ctx.out("cast", {"X": picked}, {"out_dtype": dtype}) if dtype != "int64" else ctx.out("assign", {"X": picked})
