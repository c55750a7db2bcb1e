"""Reductions over some or all dims.

The result keeps X's dtype, except where numpy's (and Paddle's) answer is
another: a mean of integers or bools is float64, and a sum of int32 or bool
is int64 (a count, not an overflowing int32 or an ``or``).
"""
from __future__ import annotations

import math

from ..dtypes import DTYPES, FLOAT_DTYPES, NUMERIC_DTYPES
from ..schema import Attr, TensorType, same_as, schema
from ..shapes import normalize_axes
from .nn import minus_max


def reduced_shape(shape, dim, keep_dim, reduce_all):
    """The shape after reducing ``dim`` (all dims when ``reduce_all`` or ``dim`` is empty)."""
    rank = len(shape)
    axes = set(range(rank)) if (reduce_all or not dim) else set(normalize_axes(dim, rank))
    if keep_dim:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


MEAN_DTYPE = {"int32": "float64", "int64": "float64", "bool": "float64"}
SUM_DTYPE = {"int32": "int64", "bool": "int64"}
"""A reduction's result dtype where it is not X's."""


def _reduce_to(dtypes):
    def infer(ctx):
        x = ctx.input("X")
        shape = reduced_shape(x.shape, ctx.attr("dim"), ctx.attr("keep_dim"), ctx.attr("reduce_all"))
        return {"Out": TensorType(shape, dtypes.get(x.dtype, x.dtype))}

    return infer


def _mean(ctx):
    x = ctx.input("X")
    return {"Out": TensorType((), MEAN_DTYPE.get(x.dtype, x.dtype))}


def _mean_grad(ctx):
    x, g = ctx.input("X"), ctx.input("Out@GRAD")
    want = reduced_shape(x.shape, ctx.attr("dim"), ctx.attr("keep_dim"), ctx.attr("reduce_all"))
    if len(want) != len(g.shape):
        ctx.fail(f"Out@GRAD has rank {len(g.shape)}, expected the reduced shape {list(want)}")
    return {"X@GRAD": TensorType(x.shape, g.dtype)}


REDUCE_ATTRS = {"dim": Attr("ints", []), "keep_dim": Attr("bool", False), "reduce_all": Attr("bool", False)}
REDUCE_TYPES = ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min")

_RESULT_DTYPES = {"reduce_sum": SUM_DTYPE, "reduce_mean": MEAN_DTYPE}

_ADDING = ("reduce_sum", "reduce_mean")
"""The reductions that add every element of X into the output: a finite output proves X finite
(``OpSchema.finite_out_proves``); a max or min can drop an infinity."""


# The reductions' math, once, over ``xp`` (``OpSchema.compute``). A sum or mean adds up in the dtype the op
# declares where it is not X's (``SUM_DTYPE``, ``MEAN_DTYPE``), a float16 mean in float32 (as numpy's mean
# does); otherwise in X's dtype, with the namespace's own accumulator.
def _axes(x, dim, reduce_all) -> tuple[int, ...]:
    """The reduced axes of X, in order: every axis when ``reduce_all`` or ``dim`` is empty."""
    return tuple(range(x.ndim)) if reduce_all or not dim else tuple(sorted(normalize_axes(dim, x.ndim)))


_DTYPE_NAMES: dict = {}
"""dtype object -> its ``str``, once per dtype: numpy's ``str`` of a dtype runs Python (6.6 us a call on the 2-core AMD
EPYC, a quarter of the seed MLP's [64, 10] reduce_sum kernel); a dict lookup takes 0.08."""


def _dtype_name(dtype) -> str:
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype)
    return name


def _accumulator(xp, x, promoted: dict):
    """The dtype a sum adds up in: the promoted one for X's dtype, or None (X's own)."""
    name = promoted.get(_dtype_name(x.dtype))
    return None if name is None else getattr(xp, name)


def reduce_sum(xp, x, *, dim, keep_dim, reduce_all):
    """sum over ``dim``; 0 over no elements; int32 and bool add up in int64."""
    return xp.sum(x, axis=_axes(x, dim, reduce_all), keepdims=keep_dim, dtype=_accumulator(xp, x, SUM_DTYPE))


def reduce_mean(xp, x, *, dim, keep_dim, reduce_all):
    """sum / count over ``dim``; NaN over no elements (without a floating-point warning: the sum of nothing
    times NaN); ints and bools in float64."""
    axes = _axes(x, dim, reduce_all)
    count = math.prod(x.shape[a] for a in axes)
    work = xp.float32 if _dtype_name(x.dtype) == "float16" else _accumulator(xp, x, MEAN_DTYPE)
    total = xp.sum(x, axis=axes, keepdims=keep_dim, dtype=work)
    return total / count if count else total * math.nan


def reduce_prod(xp, x, *, dim, keep_dim, reduce_all):
    """prod over ``dim``, in X's dtype; 1 over no elements."""
    return xp.prod(x, axis=_axes(x, dim, reduce_all), keepdims=keep_dim, dtype=x.dtype)


def _exclusive_products(xp, flat):
    """The running products along ``flat``'s last axis of the elements before each one (1 for the first)."""
    ones = xp.ones((*flat.shape[:-1], 1), dtype=flat.dtype)
    return xp.cumprod(xp.concat([ones, flat[..., :-1]], axis=-1), axis=-1, dtype=flat.dtype)


def prod_others(xp, x, *, dim, reduce_all):
    """Each element's product of the others that reduce_prod over ``dim`` multiplies it with: the running products
    of those before it times those after it, from both ends (no division: exact at one zero and at two)."""
    axes = _axes(x, dim, reduce_all)
    kept = tuple(a for a in range(x.ndim) if a not in axes)
    size = math.prod(x.shape[a] for a in axes)
    if size == 0:
        return xp.zeros_like(x)
    moved = xp.permute_dims(x, kept + axes)
    flat = xp.reshape(moved, (*moved.shape[:len(kept)], size))
    others = _exclusive_products(xp, flat) * xp.flip(_exclusive_products(xp, xp.flip(flat, axis=-1)), axis=-1)
    back = sorted(range(x.ndim), key=(kept + axes).__getitem__)
    return xp.permute_dims(xp.reshape(others, moved.shape), tuple(back))


def _extreme(name: str):
    def compute(xp, x, *, dim, keep_dim, reduce_all):
        """max (min) over ``dim``; NaN wherever one is; over no elements an error (no identity)."""
        return getattr(xp, name)(x, axis=_axes(x, dim, reduce_all), keepdims=keep_dim)

    compute.__name__ = f"reduce_{name}"
    return compute


def mean(xp, x):
    """The mean of every element."""
    return reduce_mean(xp, x, dim=[], keep_dim=False, reduce_all=True)


def reduce_mean_grad(xp, x, dout, *, dim, keep_dim, reduce_all):
    """X@GRAD = Out@GRAD / count, at every element of X (count 1 over no elements: nothing to share out)."""
    axes = _axes(x, dim, reduce_all)
    count = max(math.prod(x.shape[a] for a in axes), 1)
    shared = (dout if keep_dim else xp.expand_dims(dout, axes)) / count
    return xp.astype(xp.broadcast_to(shared, x.shape), dout.dtype, copy=True)  # an array of its own, not a view


def logsumexp(xp, x, *, dim, keep_dim, reduce_all):
    """log(sum(exp(X))) over ``dim``, from X - max (``nn.minus_max``): finite for any finite X; -inf over no elements
    or where every element is -inf (no shift then: a row of infinities has no finite max)."""
    axes = _axes(x, dim, reduce_all)
    if not axes:  # a scalar: over itself alone
        return x
    kept = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    if math.prod(x.shape[a] for a in axes) == 0:  # the log of an empty sum
        out = xp.reshape(xp.sum(x, axis=axes, keepdims=True), kept) - math.inf
    else:
        top = xp.max(x, axis=axes, keepdims=True)
        top = xp.where(xp.isfinite(top), top, xp.zeros((), x.dtype))
        out = xp.log(xp.sum(xp.exp(minus_max(xp, x, top)), axis=axes, keepdims=True)) + top
    return out if keep_dim else xp.reshape(out, tuple(d for i, d in enumerate(x.shape) if i not in axes))


COMPUTE = {"reduce_sum": reduce_sum, "reduce_mean": reduce_mean, "reduce_max": _extreme("max"),
           "reduce_min": _extreme("min"), "reduce_prod": reduce_prod, "mean": mean,
           "reduce_mean_grad": reduce_mean_grad, "logsumexp": logsumexp, "prod_others": prod_others}
"""op type -> its computation over ``xp`` (``OpSchema.compute``)."""

ONNX = {"reduce_sum": "ReduceSum", "reduce_mean": "ReduceMean", "reduce_max": "ReduceMax", "reduce_min": "ReduceMin",
        "reduce_prod": "ReduceProd", "logsumexp": "ReduceLogSumExp"}
"""op type -> the ONNX Reduce node it is (axes from ``dim``, keepdims from ``keep_dim``; ``tools/onnx``)."""

SCHEMAS = tuple(
    schema(t, ["X"], ["Out"], _reduce_to(_RESULT_DTYPES.get(t, {})), REDUCE_ATTRS,
           doc=f"{t[7:]} over `dim` (every dim when empty or reduce_all)."
               + (" max and min of an empty axis are a run-time error." if t in ("reduce_max", "reduce_min") else ""),
           dtypes={"X": DTYPES}, compute=COMPUTE[t], finite_out_proves=("X",) if t in _ADDING else ())
    for t in REDUCE_TYPES
) + (
    schema("reduce_prod", ["X"], ["Out"], _reduce_to({}), REDUCE_ATTRS,
           doc="prod over `dim` (every dim when empty or reduce_all); 1 over no elements; in X's dtype.",
           dtypes={"X": NUMERIC_DTYPES}, compute=reduce_prod),
    schema("prod_others", ["X"], ["Out"], same_as("X"),
           {"dim": Attr("ints", []), "reduce_all": Attr("bool", False)},
           doc="For each element, the product of the other elements reduce_prod over `dim` multiplies it with: "
               "reduce_prod's gradient without a division, exact at zeros.",
           dtypes={"X": NUMERIC_DTYPES}, compute=prod_others),
    schema("logsumexp", ["X"], ["Out"], _reduce_to({}), REDUCE_ATTRS,
           doc="log(sum(exp(X))) over `dim`, computed from X - max: finite for any finite X.",
           dtypes={"X": FLOAT_DTYPES}, compute=logsumexp),
    schema("mean", ["X"], ["Out"], _mean, doc="The mean of all elements, a scalar (float64 for ints and bools).",
           dtypes={"X": DTYPES}, compute=mean, finite_out_proves=("X",)),
    schema("reduce_mean_grad", ["X", "Out@GRAD"], ["X@GRAD"], _mean_grad, REDUCE_ATTRS,
           doc="reduce_mean's gradient: Out@GRAD broadcast to X's run-time shape, divided by the count.",
           dtypes={"X": FLOAT_DTYPES, "Out@GRAD": "X"}, compute=reduce_mean_grad),
)


__all__ = ["COMPUTE", "MEAN_DTYPE", "ONNX", "REDUCE_ATTRS", "REDUCE_TYPES", "SCHEMAS", "SUM_DTYPE", "logsumexp", "mean",
           "prod_others", "reduce_mean", "reduce_mean_grad", "reduce_prod", "reduce_sum", "reduced_shape"]
