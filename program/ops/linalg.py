"""Matrix products: matmul, and einsum (its equation read by ``program/einsum_equation.py``)."""
from __future__ import annotations

import math

from ..dtypes import NUMERIC_DTYPES
from ..einsum_equation import EinsumError, parse_einsum
from ..errors import ShapeInferenceError
from ..schema import Attr, Slot, TensorType, schema
from ..shapes import broadcast_shapes, dims_agree


def _matmul(ctx):
    """numpy's rules: a 1-D X is a row [1, k] and a 1-D Y a column [k, 1], and that dim leaves the result;
    the transpose attrs apply only to operands of rank >= 2."""
    x, y = ctx.input("X"), ctx.input("Y")
    if x.dtype != y.dtype:
        ctx.fail(f"dtypes differ: {x.dtype} vs {y.dtype}")
    if len(x.shape) < 1 or len(y.shape) < 1:
        ctx.fail(f"matmul needs inputs of rank >= 1, got ranks {len(x.shape)} and {len(y.shape)}")
    xs = (1,) + tuple(x.shape) if len(x.shape) == 1 else tuple(x.shape)
    ys = tuple(y.shape) + (1,) if len(y.shape) == 1 else tuple(y.shape)
    m, k = xs[-2:][::-1] if ctx.attr("transpose_x") and len(x.shape) > 1 else xs[-2:]
    k2, n = ys[-2:][::-1] if ctx.attr("transpose_y") and len(y.shape) > 1 else ys[-2:]
    if not dims_agree(k, k2):
        ctx.fail(f"inner dimensions differ: {k} vs {k2}")
    batch = broadcast_shapes(xs[:-2], ys[:-2])
    return {"Out": TensorType(batch + (m,) * (len(x.shape) > 1) + (n,) * (len(y.shape) > 1), x.dtype)}


def _einsum(ctx):
    """Each letter's size is its operands' sizes broadcast (equal, or 1); the result has its letters' sizes."""
    xs = ctx.inputs("Operands")
    if any(x.dtype != xs[0].dtype for x in xs):
        ctx.fail(f"operands must share one dtype, got {[x.dtype for x in xs]}")
    try:
        eq = parse_einsum(ctx.attr("equation"), [len(x.shape) for x in xs])
    except EinsumError as e:
        ctx.fail(f"equation '{ctx.attr('equation')}': {e}")
    sizes: dict[str, tuple[int, ...]] = {}
    for term, x in zip(eq.terms, xs):
        for c, d in zip(term, x.shape):
            try:
                sizes[c] = broadcast_shapes(sizes.get(c, ()), (d,))
            except ShapeInferenceError:
                ctx.fail(f"equation '{ctx.attr('equation')}': index {c} has sizes {sizes[c][0]} and {d}, "
                         f"operand shapes {[list(x.shape) for x in xs]}")
    return {"Out": TensorType(tuple(sizes[c][0] for c in eq.out), xs[0].dtype)}


def einsum(xp, *xs, equation: str):
    """numpy's einsum on the equation with its ellipsis spelled out in letters (``einsum_equation``); the engine's
    ``xp.einsum`` sums the products in full precision (numpy's through BLAS where it contracts pairs)."""
    return xp.einsum(parse_einsum(equation, [x.ndim for x in xs]).text(), *xs)


def _matmul_multiply_adds(op, shape) -> int:
    """Each output element sums over the contracted dim, X's last (its second-last when transposed; a 1-D X's
    only one)."""
    x = shape(op.inputs["X"][0])
    k = x[-2] if op.attrs.get("transpose_x") and len(x) > 1 else x[-1]
    return math.prod(shape(op.outputs["Out"][0])) * k


SCHEMAS = (
    schema("matmul", ["X", "Y"], ["Out"], _matmul,
           {"transpose_x": Attr("bool", False), "transpose_y": Attr("bool", False)},
           doc="Batched matrix product over the last two dims; batch dims broadcast; 1-D operands as in numpy.",
           dtypes={"X": NUMERIC_DTYPES, "Y": "X"}, multiply_adds=_matmul_multiply_adds),
    schema("einsum", [Slot("Operands", duplicable=True)], ["Out"], _einsum, {"equation": Attr("str")},
           doc="Sums of products of the operands' elements as the equation's index letters say (numpy's einsum: "
               "'...' broadcasts, size-1 dims broadcast, implicit results); no letter twice in one term.",
           dtypes={"Operands": NUMERIC_DTYPES}, compute=einsum),
)


__all__ = ["SCHEMAS", "einsum"]
