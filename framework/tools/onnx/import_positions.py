"""ONNX nodes whose values follow from a shape: ``Size`` (how many elements) and ``EyeLike`` (an enumeration of
positions; ``Range`` is ``import_range``). gradgen's own export writes them (batch norm's running variance,
``prod_others``), so its models import back.

Each is a constant when the shape it reads is known at import; ``Size`` of a var with run-time dims is counted
at run time. Anything else is refused.
"""
from __future__ import annotations

import math

import numpy as np

from .errors import NotImportable
from .import_checks import check_size, numpy_dtype

__all__ = ["size", "eye_like"]


def size(ctx) -> None:
    """Size -> the int64 count of input 0's elements: a constant when its shape is known, else the sum of a one
    per element (exact in int64)."""
    shape = ctx.shape(0)
    if -1 not in shape:
        return ctx.bind_const(0, np.asarray(math.prod(shape), np.int64))
    ones = ctx.tmp("fill_any_like", {"X": ctx.x(0)}, {"value": 1.0, "dtype": "int64"})
    ctx.out("reduce_sum", {"X": ones}, {"dim": [], "keep_dim": False, "reduce_all": True})


def eye_like(ctx) -> None:
    """EyeLike -> a constant: ones on diagonal ``k`` of a matrix shaped like input 0 (whose shape must be known at
    import), in the ``dtype`` attr or the input's dtype."""
    shape = ctx.shape(0)
    if len(shape) != 2 or -1 in shape:
        raise NotImportable(f"an EyeLike of shape {list(shape)} (a matrix of known shape is needed)")
    dtype = numpy_dtype(ctx.attr("dtype")) if ctx.attr("dtype") is not None else ctx.dtype(0)
    check_size(shape, np.dtype(dtype).itemsize, "the identity", ctx.importer.limits)
    ctx.bind_const(0, np.eye(shape[0], shape[1], int(ctx.attr("k", 0)), dtype=dtype))
