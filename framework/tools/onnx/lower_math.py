"""Lowerings of the elementwise, activation, matmul, einsum, reduction, comparison and creation ops.

Every lowering uses only ONNX ops that ONNX Runtime's CPU provider runs in float64 as well as
float32 (it has no float64 ``Erf``, ``Softplus`` or ``OneHot``, so those are built from others).
"""
from __future__ import annotations

import math

import numpy as np

from gradgen.program.einsum_equation import parse_einsum, spell
from gradgen.program.ops import reduction

from .context import Lowering
from .graph import fill_value, onnx_dtype, value_info

__all__ = ["LOWERINGS", "OWN_EXPORTS", "RUN_TIME_SIZES", "erf", "log1p", "mean_node", "nan_along", "reduce_axes"]

REDUCE = {t: o for t, o in reduction.ONNX.items() if t not in ("logsumexp", "reduce_mean")}
"""The reductions that are one ONNX Reduce node, from their family (``program/ops/reduction.ONNX``); logsumexp is
exported from its max-shifted form (``logsumexp``), finite where ReduceLogSumExp's naive one overflows, and
reduce_mean as sum / count (``mean_node``), NaN over no elements where ReduceMean gives 0."""

ERF_TERMS = 160
"""Terms of the series that computes float64 erf; enough for |x| <= 6, beyond which erf is +-1 in float64."""


def log1p(ctx: Lowering, e: str, dtype: str) -> str:
    """log(1 + e), accurate for tiny e (ONNX has no Log1p): log(u) * e / (u - 1) with u = 1 + e, or e when u == 1."""
    g = ctx.g
    u = g.node("Add", [ctx.scalar(1.0, dtype), e])
    um1 = g.node("Sub", [u, ctx.scalar(1.0, dtype)])
    exact = g.node("Equal", [um1, ctx.scalar(0.0, dtype)])
    safe = g.node("Where", [exact, ctx.scalar(1.0, dtype), um1])
    return g.node("Where", [exact, e, g.node("Div", [g.node("Mul", [g.node("Log", [u]), e]), safe])])


def erf(ctx: Lowering, z: str, dtype: str) -> str:
    """erf(z). float32 uses ONNX ``Erf``; float64 (which ONNX Runtime's Erf lacks) sums the all-positive series
    erf(z) = 2/sqrt(pi) * z * exp(-z^2) * sum_n (2 z^2)^n / (1 * 3 * ... * (2n + 1)) by Horner's rule in a
    ``Loop``, with z clamped to [-6, 6] first (no cancellation, so it is accurate to a few ulps). Beyond that
    erf(z) is +-1 in float64, and is given as exactly that (the series at 6 falls an ulp short: 1 + erf(-inf)
    must be 0, so that x * (1 + erf(x / sqrt 2)) / 2 is NaN at -inf and -0 at -40, as on the engines)."""
    g = ctx.g
    if dtype != "float64":
        return g.node("Erf", [z])
    zc = g.node("Clip", [z, ctx.scalar(-6.0, dtype), ctx.scalar(6.0, dtype)])
    z2 = g.node("Mul", [zc, zc])
    two_z2 = g.node("Mul", [ctx.scalar(2.0, dtype), z2])
    body, _ = ctx.subgraph()
    it, c_in, s_in = body.names.fresh("erf_i"), body.names.fresh("erf_cond"), body.names.fresh("erf_s")
    n = body.node("Sub", [body.const(np.int64(ERF_TERMS)), it])  # iteration i adds term n = ERF_TERMS - i
    denom = body.node("Cast", [body.node("Add", [body.node("Mul", [body.const(np.int64(2)), n]),
                                                 body.const(np.int64(1))])], to=onnx_dtype("float64"))
    s_out = body.node("Add", [body.const(np.float64(1.0)), body.node("Mul", [body.node("Div", [two_z2, denom]), s_in])])
    c_out = body.node("Identity", [c_in])
    graph = body.graph("erf_series", [value_info(it, "int64", []), value_info(c_in, "bool", []),
                                      value_info(s_in, "float64", None)],
                       [value_info(c_out, "bool", []), value_info(s_out, "float64", None)])
    ones = g.node("Expand", [ctx.scalar(1.0, dtype), g.node("Shape", [zc])])
    series = g.node("Loop", [g.const(np.int64(ERF_TERMS)), g.const(np.bool_(True)), ones], body=graph)
    front = g.node("Mul", [g.node("Mul", [ctx.scalar(2.0 / math.sqrt(math.pi), dtype), zc]),
                           g.node("Exp", [g.node("Neg", [z2])])])
    saturated = g.node("GreaterOrEqual", [g.node("Abs", [z]), ctx.scalar(6.0, dtype)])
    return g.node("Where", [saturated, g.node("Sign", [z]), g.node("Mul", [front, series])])






def mod(ctx: Lowering) -> None:
    """ONNX's Mod takes fmod=0 (the floor remainder) on integers only: on floats the floor remainder is fmod's
    remainder moved by Y where it is nonzero and its sign differs from Y's, and a zero with Y's sign (as numpy's
    mod computes it: -6 mod 3 is 0.0, where fmod gives -0.0)."""
    x, y, g = ctx.x("X"), ctx.x("Y"), ctx.g
    dtype = ctx.dtype("X")
    if ctx.attr("fmod") or not dtype.startswith("float"):
        ctx.emit("Mod", [x, y], fmod=int(bool(ctx.attr("fmod"))))
        return
    r = g.node("Mod", [x, y], fmod=1)
    zero = ctx.scalar(0.0, dtype)
    nonzero = g.node("Not", [g.node("Equal", [r, zero])])
    moved = g.node("And", [nonzero, g.node("Not", [g.node("Equal", [g.node("Less", [r, zero]),
                                                                  g.node("Less", [y, zero])])])])
    # a zero takes Y's sign, in Where's second branch: ONNX Runtime (1.32) gives +0.0 for a -0.0 taken from the first
    signed_zero = g.node("Mul", [zero, g.node("Sign", [y])])
    ctx.emit("Where", [nonzero, g.node("Where", [moved, g.node("Add", [r, y]), r]), signed_zero])
























def swap_last(ctx: Lowering, x: str, rank: int) -> str:
    perm = list(range(rank))
    perm[-2], perm[-1] = perm[-1], perm[-2]
    return ctx.g.node("Transpose", [x], perm=perm)


def matmul(ctx):
    x, y = ctx.x("X"), ctx.x("Y")
    if ctx.attr("transpose_x") and ctx.rank("X") > 1:  # a 1-D operand is never transposed, as in numpy
        x = swap_last(ctx, x, ctx.rank("X"))
    if ctx.attr("transpose_y") and ctx.rank("Y") > 1:
        y = swap_last(ctx, y, ctx.rank("Y"))
    # 1-D operands made 2-D and squeezed after: ONNX Runtime 1.32 fuses Transpose into MatMul and then gets
    # a matrix times a 1-D vector wrong
    squeeze = []
    if ctx.rank("X") == 1:
        x, squeeze = ctx.g.node("Unsqueeze", [x, ctx.g.ints([0])]), squeeze + [-2]
    if ctx.rank("Y") == 1:
        y, squeeze = ctx.g.node("Unsqueeze", [y, ctx.g.ints([-1])]), squeeze + [-1]
    if not squeeze:
        return ctx.emit("MatMul", [x, y])
    ctx.emit("Squeeze", [ctx.g.node("MatMul", [x, y]), ctx.g.ints(squeeze)])


def einsum(ctx):
    """ONNX Einsum with the ellipsis spelled in letters (the ranks are static), as the kernel runs it.

    ONNX's Einsum does not broadcast a size-1 dim against a larger one under the same letter, so an operand's
    dim of static size 1 where another operand has the letter at another size is squeezed away first (the
    operand is constant along it) and the letter dropped from its term. (A -1 dim that is 1 at run time
    against a larger one is left to ONNX Runtime.)
    """
    shapes = [ctx.op.block.var(n).shape for n in ctx.op.input("Operands")]
    eq = parse_einsum(ctx.attr("equation"), [len(s) for s in shapes])
    sizes = {c: {s[t.index(c)] for t, s in zip(eq.terms, shapes) if c in t} for c in set("".join(eq.terms))}
    xs, terms = [], []
    for x, term, shape in zip(ctx.xs("Operands"), eq.terms, shapes):
        axes = [a for a, c in enumerate(term) if shape[a] == 1 and sizes[c] != {1}]
        xs.append(ctx.g.node("Squeeze", [x, ctx.g.ints(axes)]) if axes else x)
        terms.append("".join(c for a, c in enumerate(term) if a not in axes))
    ctx.emit("Einsum", xs, equation=spell(terms, eq.out))


def reduce_axes(ctx: Lowering) -> list[int] | None:
    """The normalized axes a reduce op reduces, or None for all of them."""
    rank, dim = ctx.rank(), ctx.attr("dim")
    if ctx.attr("reduce_all") or not dim:
        return None
    return sorted({d % rank for d in dim})


def reduce_node(ctx: Lowering, onnx_op: str, x: str, axes: list[int] | None, keep: bool, out: str | None = None) -> str:
    """A Reduce* node over ``axes`` (None: all), in opset 17's spelling (ReduceSum takes axes as an input)."""
    keep = int(keep)
    if onnx_op == "ReduceSum":
        inputs = [x] if axes is None else [x, ctx.g.ints(axes)]
        return ctx.g.node(onnx_op, inputs, out=out, keepdims=keep)
    if axes is None:
        return ctx.g.node(onnx_op, [x], out=out, keepdims=keep)
    return ctx.g.node(onnx_op, [x], out=out, keepdims=keep, axes=axes)


def _reduce(onnx_op):
    def lower(ctx):
        x, declared = ctx.x(), ctx.out_var().dtype
        if ctx.dtype() != declared:  # int32 and bool add up in int64, as the compute does
            x = ctx.g.node("Cast", [x], to=onnx_dtype(declared))
        if ctx.rank() == 0:
            return ctx.finish(x)
        axes, keep = reduce_axes(ctx), ctx.attr("keep_dim")
        if onnx_op in ("ReduceMax", "ReduceMin") and np.dtype(declared).kind == "f":
            # ONNX Runtime's ReduceMax and ReduceMin pass over a NaN that is not first; numpy's give NaN
            out = reduce_node(ctx, onnx_op, x, axes, keep)
            return ctx.finish(ctx.g.node("Where", [nan_along(ctx, x, declared, axes, keep),
                                                   ctx.scalar(np.nan, declared), out]))
        ctx.set(reduce_node(ctx, onnx_op, x, axes, keep, out=ctx.name()))
    return lower


def nan_along(ctx: Lowering, x: str, dtype: str, axes: list[int] | None, keep: bool) -> str:
    """Whether ``x`` (of float ``dtype``) holds a NaN along ``axes`` (None: anywhere), as a bool tensor."""
    g = ctx.g
    marks = g.node("Cast", [g.node("IsNaN", [x])], to=onnx_dtype(dtype))
    return g.node("Greater", [reduce_node(ctx, "ReduceMax", marks, axes, keep), ctx.scalar(0.0, dtype)])


def _count(ctx: Lowering, x: str, dtype: str, axes: list[int] | None, keep: bool) -> str:
    """How many elements of ``x`` each reduction over ``axes`` (None: all) takes, as ``dtype``: a sum of ones shaped
    like x (run-time sizes, importable back as gradgen ops)."""
    ones = ctx.g.node("ConstantOfShape", [shape_of(ctx, x)], value=fill_value(1.0, dtype))
    return reduce_node(ctx, "ReduceSum", ones, axes, keep)


def mean_node(ctx: Lowering, x: str, dtype: str, axes: list[int] | None, keep: bool) -> str:
    """The mean of ``x`` (of ``dtype``) over ``axes`` (None: all) as its sum / count: NaN over no elements (0 / 0),
    as the engines give it, where ONNX Runtime's ReduceMean gives 0."""
    return ctx.g.node("Div", [reduce_node(ctx, "ReduceSum", x, axes, keep), _count(ctx, x, dtype, axes, keep)])


def reduce_mean(ctx):
    _mean(ctx, reduce_axes(ctx), ctx.attr("keep_dim"))


def mean(ctx):
    _mean(ctx, None, False)


def _mean(ctx: Lowering, axes: list[int] | None, keep: bool) -> None:
    """reduce_mean and mean: sum / count in float64 for integers and bools, float32 for float16 (as the compute)."""
    x, declared = ctx.x(), ctx.out_var().dtype
    work = "float32" if declared == "float16" else declared
    if ctx.dtype() != work:
        x = ctx.g.node("Cast", [x], to=onnx_dtype(work))
    if ctx.rank() == 0:
        return ctx.finish(x if work == declared else ctx.g.node("Cast", [x], to=onnx_dtype(declared)))
    out = mean_node(ctx, x, work, axes, keep)
    ctx.finish(out if work == declared else ctx.g.node("Cast", [out], to=onnx_dtype(declared)))


def logsumexp(ctx):
    # log(sum(exp(x - top))) + top with top the max, taken as 0 where it is not finite (all -inf rows), as the kernel
    g, x, dt = ctx.g, ctx.x(), ctx.dtype()
    if ctx.rank() == 0:
        return ctx.finish(x)
    axes = reduce_axes(ctx)
    top = reduce_node(ctx, "ReduceMax", x, axes, True)
    finite = g.node("Equal", [g.node("Sub", [top, top]), ctx.scalar(0.0, dt)])  # inf - inf and nan are not 0
    top = g.node("Where", [finite, top, ctx.scalar(0.0, dt)])
    total = reduce_node(ctx, "ReduceSum", g.node("Exp", [g.node("Sub", [x, top])]), axes, True)
    out = g.node("Add", [g.node("Log", [total]), top])
    if not ctx.attr("keep_dim"):
        out = g.node("Squeeze", [out] + ([] if axes is None else [g.ints(axes)]))
    ctx.finish(out)


def prod_others(ctx):
    # per element, the product of the others along the reduced axes, multiplied in the engines' order (their
    # exclusive running products from both ends: x0 * ... * x(i-1), times x(n-1) * ... * x(i+1)), so that
    # overflow, 0 * inf and NaN fall where they do there. Move the reduced axes last and flatten them to n; row i
    # of an [n, n] matrix holds the factors of element i's prefix in order and 1 elsewhere (multiplying by 1 is
    # exact), and so does the reversed row for its suffix; ReduceProd multiplies each row in index order in
    # ONNX Runtime as in numpy. No division: zeros are exact.
    g, x, dt, rank = ctx.g, ctx.x(), ctx.dtype(), ctx.rank()
    if rank == 0:
        return ctx.finish(g.node("ConstantOfShape", [shape_of(ctx, x)], value=fill_value(1, dt)))
    axes = reduce_axes(ctx)
    axes = list(range(rank)) if axes is None else axes
    kept = [a for a in range(rank) if a not in axes]
    moved = g.node("Transpose", [x], perm=kept + axes)
    moved_shape = shape_of(ctx, moved)
    n = g.node("ReduceProd", [g.node("Slice", [moved_shape, g.ints([len(kept)]), g.ints([rank])])], keepdims=1)
    # the flat shape spelled out, not with -1: a zero-size kept dim would leave -1 undetermined
    flat = g.node("Reshape", [moved, g.node("Concat", [g.node("Slice", [moved_shape, g.ints([0]),
                                                                          g.ints([len(kept)])]), n], axis=0)])
    ones = g.node("ConstantOfShape", [n], value=fill_value(1, "int64"))
    up = g.node("CumSum", [ones, g.const(np.int64(0))], exclusive=1)  # 0 .. n-1
    down = g.node("CumSum", [ones, g.const(np.int64(0))], exclusive=1, reverse=1)  # n-1 .. 0
    row = g.node("Unsqueeze", [up, g.ints([-1])])  # [n, 1]: element i
    one = ctx.scalar(1, dt)
    before = g.node("Where", [g.node("Less", [up, row]), g.node("Unsqueeze", [flat, g.ints([-2])]), one])
    reversed_ = g.node("Gather", [flat, down], axis=len(kept))
    after = g.node("Where", [g.node("Less", [row, down]), g.node("Unsqueeze", [reversed_, g.ints([-2])]), one])
    others = g.node("Mul", [reduce_node(ctx, "ReduceProd", before, [len(kept) + 1], False),
                            reduce_node(ctx, "ReduceProd", after, [len(kept) + 1], False)])
    back = g.node("Reshape", [others, moved_shape])
    ctx.emit("Transpose", [back], perm=[int(i) for i in np.argsort(kept + axes)])


def shape_of(ctx: Lowering, x: str) -> str:
    return ctx.g.node("Shape", [x])


def reduce_mean_grad(ctx):
    # Out@GRAD / count at every element (count 1 over no elements: nothing to share out)
    g, x, dout, dt = ctx.g, ctx.x("X"), ctx.x("Out@GRAD"), ctx.dtype("Out@GRAD")
    rank = ctx.rank("X")
    axes = reduce_axes(ctx)
    axes = list(range(rank)) if axes is None else axes
    if rank == 0:
        return ctx.finish(dout, slot="X@GRAD")
    count = g.node("Max", [_count(ctx, x, dt, axes, True), ctx.scalar(1.0, dt)])
    if not ctx.attr("keep_dim"):
        dout = g.node("Unsqueeze", [dout, g.ints(axes)])
    ctx.emit("Expand", [g.node("Div", [dout, count]), shape_of(ctx, x)], slot="X@GRAD")




def _arg(onnx_op):
    def lower(ctx):
        if ctx.rank() == 0:
            return ctx.finish(ctx.g.const(np.int64(0)))
        ctx.emit(onnx_op, [ctx.x()], axis=ctx.attr("axis") % ctx.rank(), keepdims=int(ctx.attr("keep_dim")),
                 select_last_index=0)  # the first one on ties, as numpy's
    return lower


def one_hot(ctx):
    # (x[..., None] == arange(depth)), cast: out-of-range ids give all-zero rows, as the kernel's do
    g, dt = ctx.g, ctx.dtype()
    ids = g.const(np.arange(ctx.attr("depth"), dtype=dt))
    hot = g.node("Equal", [g.node("Unsqueeze", [ctx.x(), g.ints([-1])]), ids])
    ctx.emit("Cast", [hot], to=onnx_dtype(ctx.attr("dtype")))


def _random(draw, onnx_op: str, params: dict[str, str]):
    def lower(ctx):
        if ctx.attr("redraw"):  # a new sample each run: ONNX's own op, seeded (ONNX Runtime's stream, not numpy's)
            ctx.emit(onnx_op, [], dtype=onnx_dtype(ctx.attr("dtype")), shape=list(ctx.attr("shape")),
                     seed=float(ctx.attr("seed")), **{o: float(ctx.attr(g)) for o, g in params.items()})
            return
        # The kernels draw from numpy's PCG64 seeded by the op's own seed attr: a fixed value, exported as one.
        rng = np.random.Generator(np.random.PCG64(ctx.attr("seed")))
        ctx.finish(ctx.g.const(draw(ctx, rng).astype(ctx.attr("dtype"), copy=False)))
    return lower


def _on_float16_grid(ctx, x: str) -> str:
    """float64 ``x`` rounded to float16's values, still float64, so that a Cast after it is exact: ONNX Runtime's
    Cast rounds float64 to float16 through float32, twice (65519.99 became inf, not 65504). |x| / q to the nearest
    even integer (+ 2**52 - 2**52: exact below 2**52, and above it the Cast gives inf anyway), times q, the float16
    spacing at x: 2**(e - 10) for e = floor(log2 |x|) kept to [-14, 15] (the subnormals' spacing; from 65520 on, a
    multiple of 32 past 65504 that the Cast makes inf), then x's sign as a factor of +-1 (1 / x finds -0.0's):
    ONNX Runtime's Where drops a zero's sign."""
    g, two, num = ctx.g, ctx.scalar(2.0, "float64"), lambda v: ctx.scalar(v, "float64")
    a = g.node("Abs", [x])
    e = g.node("Floor", [g.node("Div", [g.node("Log", [a]), num(math.log(2.0))])])
    # log's rounding may leave e one off beside a power of two: checked against 2**e and 2**(e + 1) themselves
    e = g.node("Where", [g.node("Less", [a, g.node("Pow", [two, e])]), g.node("Sub", [e, num(1.0)]), e])
    up = g.node("Add", [e, num(1.0)])
    e = g.node("Where", [g.node("GreaterOrEqual", [a, g.node("Pow", [two, up])]), up, e])
    q = g.node("Pow", [two, g.node("Sub", [g.node("Min", [g.node("Max", [e, num(-14.0)]), num(15.0)]), num(10.0)])])
    steps = g.node("Div", [a, q])  # to the nearest even integer by float64's own rounding (Round: not importable)
    steps = g.node("Sub", [g.node("Add", [steps, num(2.0 ** 52)]), num(2.0 ** 52)])
    on_grid = g.node("Mul", [steps, q])
    negative = g.node("Or", [g.node("Less", [x, num(0.0)]), g.node("Less", [g.node("Div", [num(1.0), x]), num(0.0)])])
    return g.node("Mul", [on_grid, g.node("Where", [negative, num(-1.0), num(1.0)])])


def rounded_once(ctx, x: str, to: str) -> str:
    """float64 ``x`` as a Cast to ``to`` rounds it once: on float16's grid first where ``to`` is float16."""
    return _on_float16_grid(ctx, x) if to == "float16" else x


def cast(ctx):
    """One Cast node; float64 to float16 first rounded once to float16's values (``_on_float16_grid``)."""
    x, to = ctx.x(), ctx.attr("out_dtype")
    if to == "float16" and ctx.dtype() == "float64":
        x = _on_float16_grid(ctx, x)
    ctx.emit("Cast", [x], to=onnx_dtype(to))


LOWERINGS = {
    **{t: _reduce(o) for t, o in REDUCE.items()}, "reduce_mean": reduce_mean,
    "elementwise_mod": mod, "matmul": matmul, "einsum": einsum, "mean": mean,
    "reduce_mean_grad": reduce_mean_grad,
    "argmax": _arg("ArgMax"),
    "argmin": _arg("ArgMin"), "one_hot": one_hot,
    "uniform_random": _random(lambda ctx, rng: rng.uniform(ctx.attr("min"), ctx.attr("max"),
                                                           tuple(ctx.attr("shape"))),
                              "RandomUniform", {"low": "min", "high": "max"}),
    "gaussian_random": _random(lambda ctx, rng: rng.normal(ctx.attr("mean"), ctx.attr("std"),
                                                           tuple(ctx.attr("shape"))),
                               "RandomNormal", {"mean": "mean", "scale": "std"}),
    "cast": cast,
    "logsumexp": logsumexp, "prod_others": prod_others,
}
"""gradgen op type -> lowering."""

RUN_TIME_SIZES = "its formula reads static shapes; the export counts elements from the run-time Shape"
OWN_EXPORTS = {**{t: "one ONNX Reduce node, axes from dim, in the declared dtype" for t in REDUCE},
               **{t: "ReduceMax/ReduceMin, NaN where a NaN is among the values (ONNX Runtime's pass over one that is "
                     "not first)" for t in ("reduce_max", "reduce_min")},
               **{t: "ReduceSum over a count from the run-time Shape (NaN over no elements, where ReduceMean "
                     "gives 0)" for t in ("reduce_mean", "mean")},
               "elementwise_mod": "one Mod node on integers (its fmod=0 takes no floats) and fmod's remainder moved "
                                  "by Y on floats (ONNX's xp has no remainder); ONNX Runtime's Mod refuses a zero "
                                  "integer divisor, as the engines do",
               "one_hot": "Unsqueeze, Equal against its arange as a constant of X's dtype, Cast (ONNX's xp has "
                          "no arange)",
               "logsumexp": "its max-shifted form over the run-time sizes, where ReduceLogSumExp's naive one overflows",
               "reduce_mean_grad": RUN_TIME_SIZES,
               "cast": "one Cast node (ONNX leaves a float no integer holds undefined; ONNX Runtime gives the "
                       "most negative integer, as the engines do), float64 to float16 rounded to float16's values "
                       "first: ONNX's xp has no nextafter for the compute's round-to-odd",
               **{t: "one ArgMax/ArgMin node (axis, keepdims, select_last_index 0: the first on ties)"
                  for t in ("argmax", "argmin")},
               "einsum": "one Einsum node, a static size-1 dim broadcast against another size squeezed first "
                         "(ONNX's Einsum does not broadcast under one letter)",
               "prod_others": "the running products as ReduceProds of [n, n] masked rows (ONNX's xp has no cumprod "
                              "or slicing)"}
"""Ops with a formula (``OpSchema.compute``) exported here rather than from it (``lower_derived``), and why."""
