"""Comparisons, selection and index ops: bool and int results through which no gradient flows (but where)."""
from __future__ import annotations

from ..dtypes import DTYPES, INT_DTYPES
from ..schema import Attr, TensorType, schema, xp_function
from ..shapes import broadcast_shapes, normalize_axis


def _compare(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    return {"Out": TensorType(broadcast_shapes(x.shape, y.shape), "bool")}


def _same_shape_bool(ctx):
    return {"Out": TensorType(ctx.input("X").shape, "bool")}


def _where(ctx):
    cond, x, y = ctx.input("Condition"), ctx.input("X"), ctx.input("Y")
    return {"Out": TensorType(broadcast_shapes(cond.shape, x.shape, y.shape), x.dtype)}


def _argmax(ctx):
    x = ctx.input("X")
    axis = normalize_axis(ctx.attr("axis"), len(x.shape))
    if ctx.attr("keep_dim"):
        shape = tuple(1 if i == axis else d for i, d in enumerate(x.shape))
    else:
        shape = tuple(d for i, d in enumerate(x.shape) if i != axis)
    return {"Out": TensorType(shape, "int64")}


def _one_hot(ctx):
    x = ctx.input("X")
    if ctx.attr("depth") <= 0:
        ctx.fail(f"depth must be positive, got {ctx.attr('depth')}")
    return {"Out": TensorType(tuple(x.shape) + (ctx.attr("depth"),), ctx.attr("dtype"))}


def one_hot(xp, x, *, depth: int, dtype: str):
    """True where a position of the new last axis equals X's integer (the engine casts it to ``dtype``): an id
    outside [0, depth), a negative one too, gives a row of zeros. The ids are compared as the integers they are:
    an engine that casts a compute's inputs to the declared dtype leaves an integers-only slot as it is
    (``backend/derive.uncast_inputs``; as float32, ids past 2**24 would merge)."""
    return xp.expand_dims(x, -1) == xp.arange(depth)


def _arg_extreme(name: str):
    """argmax or argmin along ``axis`` as int64: the first index on ties, a NaN before any number (numpy's rule,
    which jax and torch keep), the 0-d index 0 for a 0-d input; bools compared as 0 and 1 (torch's argmax takes
    no bool)."""
    def compute(xp, x, *, axis, keep_dim):
        if x.ndim == 0:
            return xp.zeros((), dtype=xp.int64)
        if xp.isdtype(x.dtype, "bool"):
            x = xp.astype(x, xp.int32)
        return xp.astype(getattr(xp, name)(x, axis=axis % x.ndim, keepdims=keep_dim), xp.int64)

    compute.__name__ = compute.__qualname__ = name
    return compute


COMPARISONS = ("less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal")
LOGICAL = ("logical_and", "logical_or", "logical_xor")

COMPUTE = {t: xp_function(name) for t, name in {
    "less_than": "less", "less_equal": "less_equal", "greater_than": "greater", "greater_equal": "greater_equal",
    "equal": "equal", "not_equal": "not_equal", "logical_and": "logical_and", "logical_or": "logical_or",
    "logical_xor": "logical_xor", "logical_not": "logical_not"}.items()}
"""op type -> its computation over ``xp`` (``OpSchema.compute``)."""

ONNX = {"less_than": "Less", "less_equal": "LessOrEqual", "greater_than": "Greater", "greater_equal": "GreaterOrEqual",
        "equal": "Equal", "logical_and": "And", "logical_or": "Or", "logical_xor": "Xor"}
"""op type -> its one ONNX node (``OpSchema.onnx``); not_equal is two (Not of Equal)."""

SCHEMAS = tuple(
    schema(t, ["X", "Y"], ["Out"], _compare, doc=f"Out = {t}(X, Y) elementwise, bool, with broadcasting.",
           dtypes={"X": DTYPES, "Y": "X"}, compute=COMPUTE[t], onnx=ONNX.get(t))
    for t in COMPARISONS
) + tuple(
    schema(t, ["X", "Y"], ["Out"], _compare, doc=f"Out = {t[len('logical_'):]}(X, Y) of bools elementwise, with "
                                                  "broadcasting.", dtypes={"X": ("bool",), "Y": "X"},
           compute=COMPUTE[t], onnx=ONNX[t])
    for t in LOGICAL
) + (
    schema("logical_not", ["X"], ["Out"], _same_shape_bool, doc="Out = not X, elementwise, of bools.",
           dtypes={"X": ("bool",)}, compute=COMPUTE["logical_not"]),
    schema("where", ["Condition", "X", "Y"], ["Out"], _where,
           doc="X where Condition holds, else Y; all three broadcast.",
           dtypes={"Condition": ("bool",), "X": DTYPES, "Y": "X"}, compute=lambda xp, c, x, y: xp.where(c, x, y), onnx="Where"),
    schema("argmax", ["X"], ["Out"], _argmax, {"axis": Attr("int"), "keep_dim": Attr("bool", False)},
           doc="The int64 index of the largest value along `axis` (first one on ties); an empty axis is a "
               "run-time error.", dtypes={"X": DTYPES}, compute=_arg_extreme("argmax")),
    schema("argmin", ["X"], ["Out"], _argmax, {"axis": Attr("int"), "keep_dim": Attr("bool", False)},
           doc="The int64 index of the smallest value along `axis` (first one on ties); an empty axis is a "
               "run-time error.", dtypes={"X": DTYPES}, compute=_arg_extreme("argmin")),
    schema("one_hot", ["X"], ["Out"], _one_hot, {"depth": Attr("int"), "dtype": Attr("dtype", "float32")},
           doc="A `depth`-long 0/1 vector per integer of X, appended as a last dim (zeros for an id outside "
               "[0, depth)).", dtypes={"X": INT_DTYPES, "dtype": DTYPES}, compute=one_hot),
)


__all__ = ["COMPARISONS", "COMPUTE", "LOGICAL", "ONNX", "SCHEMAS", "one_hot"]
