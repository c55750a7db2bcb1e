"""ONNX nodes whose values follow from a shape: ``Size`` (how many elements), ``Range`` and ``EyeLike``
(enumerations of positions). gradgen's own export writes each of them (batch norm's running variance, a gather's
gradient, ``prod_others``), so its models import back.

Each is a constant when the shape it reads is known at import; ``Size`` of a var with run-time dims is counted
at run time, and ``Range`` up to one run-time dim is enumerated along that dim. Anything else is refused.
"""
from __future__ import annotations

import math

import numpy as np

from .errors import NotImportable
from .import_checks import check_size, numpy_dtype
from .import_dims import Dim

__all__ = ["size", "range_", "eye_like"]


def size(ctx) -> None:
    """Size -> the int64 count of input 0's elements: a constant when its shape is known, else the sum of a one
    per element (exact in int64)."""
    shape = ctx.shape(0)
    if -1 not in shape:
        return ctx.bind_const(0, np.asarray(math.prod(shape), np.int64))
    ones = ctx.tmp("fill_any_like", {"X": ctx.x(0)}, {"value": 1.0, "dtype": "int64"})
    ctx.out("reduce_sum", {"X": ones}, {"dim": [], "keep_dim": False, "reduce_all": True})


def range_(ctx) -> None:
    """Range(start, limit, delta) -> ``np.arange`` of the three constants; with a limit that is one run-time dim
    (``Shape`` then ``Gather``), start 0 and delta 1, the positions along that dim (a cumulative sum of ones)."""
    limit = ctx.graph.lookup_vector(ctx.node.input[1])
    if limit is None:
        start, stop, step = (ctx.const(k) for k in range(3))
        if not all(v.size == 1 for v in (start, stop, step)):
            raise NotImportable("start, limit and delta must be scalars")
        if step.reshape(-1)[0] == 0 or not all(np.isfinite(v).all() for v in (start, stop, step)):
            raise NotImportable(f"start {start.item()}, limit {stop.item()}, delta {step.item()} (finite, delta not 0)")
        dtype, (first, last, by) = start.dtype, (v.item() for v in (start, stop, step))
        count = max(0, -((first - last) // by) if dtype.kind in "iu" else math.ceil((last - first) / by))
        check_size([count], dtype.itemsize, "the range", ctx.importer.limits)
        # ONNX's definition: start + k * delta, computed in the inputs' type (not arange's running sum)
        values = start.reshape(()) + np.arange(count, dtype=dtype) * step.reshape(())
        return ctx.bind_const(0, values.astype(dtype))
    dim = limit.entries[0] if len(limit.entries) == 1 else None
    first, step = ctx.const(0), ctx.const(2)
    if not isinstance(dim, Dim) or first.reshape(-1).tolist() != [0] or step.reshape(-1).tolist() != [1]:
        raise NotImportable("a Range to a limit known only at run time other than 0, 1, ..., dim - 1")
    along = ctx.importer.block().var(dim.var)
    others = [a for a in range(len(along.shape)) if a != dim.axis]
    line = dim.var  # reduced to the one dim whose length is the limit
    if others:
        line = ctx.tmp("reduce_sum", {"X": line}, {"dim": others, "keep_dim": False, "reduce_all": False})
    ones = ctx.tmp("fill_any_like", {"X": line}, {"value": 1.0, "dtype": first.dtype.name})
    ctx.out("cumsum", {"X": ones}, {"axis": 0, "exclusive": True})  # 0, 1, ..., n - 1


def eye_like(ctx) -> None:
    """EyeLike -> a constant: ones on diagonal ``k`` of a matrix shaped like input 0 (whose shape must be known at
    import), in the ``dtype`` attr or the input's dtype."""
    shape = ctx.shape(0)
    if len(shape) != 2 or -1 in shape:
        raise NotImportable(f"an EyeLike of shape {list(shape)} (a matrix of known shape is needed)")
    dtype = numpy_dtype(ctx.attr("dtype")) if ctx.attr("dtype") is not None else ctx.dtype(0)
    check_size(shape, np.dtype(dtype).itemsize, "the identity", ctx.importer.limits)
    ctx.bind_const(0, np.eye(shape[0], shape[1], int(ctx.attr("k", 0)), dtype=dtype))
