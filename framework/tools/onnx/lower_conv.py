"""The convolution over ONNX values (``xp.convolution`` of an op's traced compute: ``PRIMITIVES``) and the
lowerings of its adjoints and of pooling (1 to 3 spatial dims), as windows: strided ``Slice``s of the padded input.

ONNX Runtime's CPU ``Conv``, ``ConvTranspose`` and ``AveragePool`` run float32 only, so a float32
convolution and average pooling and every undilated max pooling (``MaxPool`` runs float64) use the standard
ops, and the rest is built from ``Pad``, ``Slice``, ``Einsum`` and reductions, which run in float64 too.
Window k = (i, j, ...) of an N-C-spatial input is ``xpad[:, :, i*d0 :: s0, j*d1 :: s1, ...]`` cut to the
output size; the grad ops scatter window gradients back by the adjoint: upsample by the stride with zeros and
pad into place. The input's spatial sizes must be known when exporting (``LIMITS`` says so).
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from gradgen.program.ops.conv import SCHEMAS as FAMILY
from gradgen.program.ops.conv import pool_out_size, pool_paddings, transposed_size

from .context import Lowering
from .graph import fill_value, onnx_dtype
from .lower_derived import Value
from .lower_math import reduce_node

__all__ = ["LIMITS", "LOWERINGS", "OWN_EXPORTS", "PRIMITIVES", "convolution"]


class Geometry:
    """Kernel, strides, paddings (before and after per dim, plus what ceil mode's last windows reach past them),
    dilations and the static input and output sizes of one window sweep. ``size`` is the input's spatial sizes
    (the output's, for a transposed convolution); ``out`` gives the output's where the formula cannot (pooling,
    whose ceil mode the var shape knows)."""

    def __init__(self, kernel, strides, paddings, dilations, size, out=None):
        self.kernel = tuple(kernel)
        dims = len(self.kernel)
        self.strides = tuple(strides)
        sides = pool_paddings(paddings, dims)
        self.before, self.after = list(sides[::2]), list(sides[1::2])
        self.dilations = tuple(dilations) if dilations is not None else (1,) * dims
        self.size = tuple(size)
        self.out = tuple(out) if out is not None else tuple(
            (n + b + a - (k - 1) * d - 1) // s + 1 for n, b, a, k, d, s in
            zip(self.size, self.before, self.after, self.kernel, self.dilations, self.strides))
        # what the last windows reach past the far padding (pooling's ceil mode)
        self.extra = [max(0, (o - 1) * s + (k - 1) * d + 1 - (n + b + a)) for o, s, k, d, n, b, a in
                      zip(self.out, self.strides, self.kernel, self.dilations, self.size, self.before, self.after)]

    @property
    def dims(self) -> int:
        return len(self.kernel)

    @property
    def axes(self) -> list[int]:
        return list(range(2, 2 + self.dims))

    @property
    def padded(self) -> bool:
        return any(self.before) or any(self.after) or any(self.extra)

    def padded_size(self) -> list[int]:
        return [n + b + a + e for n, b, a, e in zip(self.size, self.before, self.after, self.extra)]

    def spans(self) -> list[int]:
        """How far one window position's taps reach, from the first output to the last, per dim."""
        return [s * (o - 1) + 1 for s, o in zip(self.strides, self.out)]

    def pads(self) -> list[int]:
        """ONNX Pad amounts of an N-C-spatial array, extra rows included."""
        return [0, 0, *self.before, 0, 0, *[a + e for a, e in zip(self.after, self.extra)]]

    def offsets(self) -> list[tuple[int, ...]]:
        """Each tap's offset in the padded input, row-major."""
        return [tuple(i * d for i, d in zip(at, self.dilations))
                for at in itertools.product(*(range(k) for k in self.kernel))]

    @property
    def taps(self) -> int:
        return math.prod(self.kernel)


def op_geometry(ctx: Lowering, x_slot: str, kernel, size=None, out=None) -> Geometry:
    """The ``Geometry`` of the op being exported, its input in slot ``x_slot`` (``size`` overrides its spatial
    sizes)."""
    op = ctx.op
    return Geometry(kernel, op.attr("strides"), op.attr("paddings"),
                    op.attr("dilations") if "dilations" in op.attrs else None,
                    size or ctx.var(x_slot).shape[2:], out)


def windows(ctx: Lowering, x: str, geo: Geometry, pad_value: float, dtype: str) -> list[str]:
    """The window views of ``x``, one per tap, each [N, C, *out]."""
    g = ctx.g
    if geo.padded:
        x = g.node("Pad", [x, g.ints(geo.pads()), ctx.scalar(pad_value, dtype)])
    return [g.node("Slice", [x, g.ints(list(at)), g.ints([a + s for a, s in zip(at, geo.spans())]),
                             g.ints(geo.axes), g.ints(list(geo.strides))]) for at in geo.offsets()]


def stacked(ctx: Lowering, parts: list[str]) -> str:
    """Window views stacked on a new last axis: [N, C, *out, K]."""
    return ctx.g.node("Concat", [ctx.g.node("Unsqueeze", [p, ctx.g.ints([-1])]) for p in parts], axis=-1)


def unstacked(ctx: Lowering, cols: str, geo: Geometry) -> list[str]:
    return [ctx.g.node("Gather", [cols, ctx.g.const(np.int64(i))], axis=2 + geo.dims) for i in range(geo.taps)]


def scatter(ctx: Lowering, parts: list[str], geo: Geometry) -> str:
    """The adjoint of ``windows``: sum window gradients [N, C, *out] back into an [N, C, *size] array."""
    g, dims, spans, padded = ctx.g, geo.dims, geo.spans(), geo.padded_size()
    total = None
    for part, at in zip(parts, geo.offsets()):
        up = part
        if any(s > 1 for s in geo.strides):  # put s-1 zeros after every element along each strided dim
            up = g.node("Unsqueeze", [up, g.ints([3 + 2 * i for i in range(dims)])])
            ends = [0, 0] + [p for s in geo.strides for p in (0, s - 1)]
            up = g.node("Pad", [up, g.ints([0] * (2 + 2 * dims) + ends)])
            up = g.node("Reshape", [up, g.ints([0, 0] + [o * s for o, s in zip(geo.out, geo.strides)])])
            up = g.node("Slice", [up, g.ints([0] * dims), g.ints(spans), g.ints(geo.axes)])
        placed = g.node("Pad", [up, g.ints([0, 0, *at, 0, 0, *[p - a - s for p, a, s in zip(padded, at, spans)]])])
        total = placed if total is None else g.node("Add", [total, placed])
    if geo.padded:
        total = g.node("Slice", [total, g.ints(geo.before), g.ints([b + n for b, n in zip(geo.before, geo.size)]),
                                 g.ints(geo.axes)])
    return total


def _groups(ctx: Lowering, value: str, axis: int, size: int, groups: int) -> list[str]:
    if groups == 1:
        return [value]
    return [ctx.g.node("Slice", [value, ctx.g.ints([k * size]), ctx.g.ints([(k + 1) * size]), ctx.g.ints([axis])])
            for k in range(groups)]


def _filter_shape(ctx: Lowering):
    o, cg, *kernel = ctx.var("Filter").shape
    return o, cg, tuple(kernel), ctx.attr("groups")


def _filters(ctx: Lowering, w: str, o, cg, kernel, groups) -> list[str]:
    """The filter ``w`` per group as [O/G, C/G, K]."""
    return [ctx.g.node("Reshape", [part, ctx.g.ints([o // groups, cg, math.prod(kernel)])])
            for part in _groups(ctx, w, 0, o // groups, groups)]


def _letters(geo: Geometry) -> str:
    """Einsum letters of the spatial dims."""
    return "uvw"[:geo.dims]


def convolution(x: Value, w: Value, *, strides, paddings, dilations, groups: int) -> Value:
    """``xp.convolution`` over ONNX values (``lower_derived``): one ``Conv`` in float32, which ONNX Runtime's
    ``Conv`` runs (the standard op, readable anywhere); in other dtypes each window a strided ``Slice`` and the
    products an ``Einsum`` per group. Reads the static spatial sizes of ``x`` and the filter's shape (``LIMITS``)."""
    ctx = x.ctx
    o, cg, *kernel = w.dims
    geo = Geometry(kernel, strides, paddings, dilations, x.dims[2:])
    if x.dtype == np.float32:
        return Value(ctx.g.node("Conv", [x.name, w.name], kernel_shape=list(kernel), strides=list(geo.strides),
                                pads=geo.before + geo.after, dilations=list(geo.dilations), group=groups),
                     x.dtype, x.ndim, ctx)
    sp = _letters(geo)
    cols = stacked(ctx, windows(ctx, x.name, geo, 0.0, x.dtype.name))
    outs = [ctx.g.node("Einsum", [c, f], equation=f"nc{sp}k,ock->no{sp}")
            for c, f in zip(_groups(ctx, cols, 1, cg, groups), _filters(ctx, w.name, o, cg, kernel, groups))]
    return Value(ctx.g.node("Concat", outs, axis=1) if groups > 1 else outs[0], x.dtype, x.ndim, ctx)


PRIMITIVES = {"convolution": convolution}
"""What the ops' computes ask of ``xp`` that numpy's names do not cover, over ONNX values (``export.XP``)."""


def conv2d_input_grad(ctx):
    o, cg, kernel, groups = _filter_shape(ctx)
    geo = op_geometry(ctx, "Input", kernel)
    ctx.finish(_spread(ctx, geo, ctx.x("Output@GRAD"), o, cg, kernel, groups), "Input@GRAD")


def conv2d_transpose(ctx):
    # the input adjoint of the filter read as a convolution's [O = C_in, C_out/groups, *kernel], at the output size
    o, cg, kernel, groups = _filter_shape(ctx)
    size = [transposed_size(d, k, s, p, dl, e) for d, k, s, p, dl, e in
            zip(ctx.var("Input").shape[2:], kernel, ctx.attr("strides"), ctx.attr("paddings"),
                ctx.attr("dilations"), ctx.attr("output_padding"))]
    geo = op_geometry(ctx, "Input", kernel, size=size)
    ctx.finish(_spread(ctx, geo, ctx.x("Input"), o, cg, kernel, groups), "Output")


def _spread(ctx: Lowering, geo: Geometry, gout: str, o, cg, kernel, groups) -> str:
    """The convolution's adjoint in its input: ``gout`` [N, O, *out] spread back over [N, C, *size]."""
    sp = _letters(geo)
    gouts = _groups(ctx, gout, 1, o // groups, groups)
    gcols = [ctx.g.node("Einsum", [go, w], equation=f"no{sp},ock->nc{sp}k")
             for go, w in zip(gouts, _filters(ctx, ctx.x("Filter"), o, cg, kernel, groups))]
    gcols = ctx.g.node("Concat", gcols, axis=1) if groups > 1 else gcols[0]
    return scatter(ctx, unstacked(ctx, gcols, geo), geo)


def _with_a_zero_row(ctx: Lowering, v: str, dims: list[int], dtype: str) -> str:
    """``v`` [N, *dims] with one row of zeros after its N. ONNX Runtime 1.32's Einsum dies of SIGFPE summing over a
    zero-size dim (the filter gradient of an empty batch); one more product 0 * 0 adds +0 to sums that start from
    +0 (numpy's and ONNX Runtime's products), so nothing changes where N > 0."""
    zeros = ctx.g.node("ConstantOfShape", [ctx.g.ints([1, *dims])], value=fill_value(0.0, dtype))
    return ctx.g.node("Concat", [v, zeros], axis=0)


def conv2d_filter_grad(ctx):
    o, cg, kernel, groups = _filter_shape(ctx)
    geo = op_geometry(ctx, "Input", kernel)
    sp = _letters(geo)
    dt, channels = ctx.dtype("Input"), ctx.var("Input").shape[1]
    cols = stacked(ctx, windows(ctx, ctx.x("Input"), geo, 0.0, dt))
    cols = _with_a_zero_row(ctx, cols, [channels, *geo.out, geo.taps], dt)
    gout = _with_a_zero_row(ctx, ctx.x("Output@GRAD"), [o, *geo.out], dt)
    gouts = _groups(ctx, gout, 1, o // groups, groups)
    parts = [ctx.g.node("Reshape", [ctx.g.node("Einsum", [c, go], equation=f"nc{sp}k,no{sp}->ock"),
                                    ctx.g.ints([o // groups, cg, *kernel])])
             for c, go in zip(_groups(ctx, cols, 1, cg, groups), gouts)]
    ctx.emit("Concat", parts, slot="Filter@GRAD", axis=0) if groups > 1 else ctx.finish(parts[0], "Filter@GRAD")


def _pool_geometry(ctx: Lowering) -> Geometry:
    ksize = ctx.attr("ksize")
    x = ctx.var("X").shape
    sides = pool_paddings(ctx.attr("paddings"), len(ksize))
    spans = [(k - 1) * d + 1 for k, d in zip(ksize, ctx.attr("dilations"))]
    out = [pool_out_size(n, span, s, before, after, ctx.attr("ceil_mode"))
           for n, span, s, before, after in zip(x[2:], spans, ctx.attr("strides"), sides[::2], sides[1::2])]
    return op_geometry(ctx, "X", ksize, out=out)


def _counts(ctx: Lowering, geo: Geometry, dtype: str) -> np.ndarray:
    """The divisor of each average window, [1, 1, *out]: its in-bounds elements (``exclusive``) or its area."""
    if not ctx.attr("exclusive"):
        return np.full((1, 1, *geo.out), geo.taps, dtype=dtype)
    ones = np.pad(np.ones(geo.size), [(b, a + e) for b, a, e in zip(geo.before, geo.after, geo.extra)])
    counts = np.zeros(geo.out)
    for at in geo.offsets():
        counts += ones[tuple(slice(i, i + span, s) for i, span, s in zip(at, geo.spans(), geo.strides))]
    return counts.reshape(1, 1, *geo.out).astype(dtype)


def _window_has_nan(ctx: Lowering, cols: str, last: int) -> str:
    """[N, C, *out, 1] bools: whether each window (the taps on axis ``last``) holds a NaN."""
    g, dt = ctx.g, ctx.dtype("X")
    flags = g.node("Cast", [g.node("IsNaN", [cols])], to=onnx_dtype(dt))
    return g.node("Greater", [g.node("ReduceMax", [flags], axes=[last], keepdims=1), ctx.scalar(0.0, dt)])


def _first_max(ctx: Lowering, geo: Geometry) -> str:
    """[N, C, *out, K] bools marking the first maximum of each window of X, a NaN being the maximum where the
    window holds one (its first NaN), as the kernels pick. Stated without ArgMax (ONNX leaves its NaN to each
    runtime) and without trusting ReduceMax with NaN (ONNX Runtime's skips it): the taps equal to the window's
    max, or its NaN taps where it has one, and of those the one with no earlier hit (an exclusive running count)."""
    g, last = ctx.g, 2 + geo.dims
    cols = stacked(ctx, windows(ctx, ctx.x("X"), geo, -np.inf, ctx.dtype("X")))
    nan, has_nan = g.node("IsNaN", [cols]), _window_has_nan(ctx, cols, last)
    top = g.node("ReduceMax", [cols], axes=[last], keepdims=1)
    hit = g.node("Or", [g.node("And", [has_nan, nan]),
                        g.node("And", [g.node("Not", [has_nan]), g.node("Equal", [cols, top])])])
    earlier = g.node("CumSum", [g.node("Cast", [hit], to=onnx_dtype("int64")), g.const(np.int64(last))], exclusive=1)
    return g.node("And", [hit, g.node("Equal", [earlier, g.const(np.int64(0))])])


def _max_pool_ieee(ctx: Lowering, standard: dict, spread: dict) -> list[str]:
    """The inputs of a ``Where`` that is ``MaxPool`` with IEEE's max: NaN for a window holding a NaN (ONNX Runtime's
    MaxPool skips it) and -inf for a window of -inf and padding only (it starts from the dtype's lowest finite
    value). A second MaxPool over a code per element (2 for NaN, 1 above -inf, 0 at -inf) tells the windows apart."""
    g, x, dt = ctx.g, ctx.x("X"), ctx.dtype("X")
    nan = g.node("Mul", [g.node("Cast", [g.node("IsNaN", [x])], to=onnx_dtype(dt)), ctx.scalar(2.0, dt)])
    code = g.node("Add", [nan, g.node("Cast", [g.node("Greater", [x, ctx.scalar(-np.inf, dt)])], to=onnx_dtype(dt))])
    kind = g.node("MaxPool", [code], **standard, **spread)
    top = g.node("MaxPool", [x], **standard, **spread)
    top = g.node("Where", [g.node("Less", [kind, ctx.scalar(0.5, dt)]), ctx.scalar(-np.inf, dt), top])
    return [g.node("Greater", [kind, ctx.scalar(1.5, dt)]), ctx.scalar(np.nan, dt), top]


def pool2d(ctx):
    geo, dt = _pool_geometry(ctx), ctx.dtype("X")
    standard = {"kernel_shape": list(geo.kernel), "strides": list(geo.strides), "pads": geo.before + geo.after}
    maximum, dilated = ctx.attr("pooling_type") == "max", any(d != 1 for d in geo.dilations)
    g, nan = ctx.g, ctx.scalar(np.nan, dt)
    # a window holding a NaN is NaN, as np.maximum gives; ONNX Runtime's MaxPool and ReduceMax skip NaN
    if not ctx.attr("ceil_mode"):  # ONNX's ceil mode keeps other last windows than Paddle's: windows then
        if maximum:  # MaxPool ignores padding, as the kernel's -inf padding does
            spread = {"dilations": list(geo.dilations)} if dilated else {}
            return ctx.emit("Where", _max_pool_ieee(ctx, standard, spread))
        if dt == "float32" and not dilated:  # AveragePool has dilations from opset 19 only
            return ctx.emit("AveragePool", [ctx.x("X")], count_include_pad=int(not ctx.attr("exclusive")), **standard)
    cols = stacked(ctx, windows(ctx, ctx.x("X"), geo, -np.inf if maximum else 0.0, dt))
    if maximum:
        last = 2 + geo.dims
        top = g.node("ReduceMax", [cols], axes=[last], keepdims=1)
        return ctx.emit("Squeeze", [g.node("Where", [_window_has_nan(ctx, cols, last), nan, top]), g.ints([last])])
    total = reduce_node(ctx, "ReduceSum", cols, [2 + geo.dims], False)
    ctx.emit("Div", [total, ctx.g.const(_counts(ctx, geo, dt))])


def pool2d_grad(ctx):
    g, geo, dt = ctx.g, _pool_geometry(ctx), ctx.dtype("X")
    gout = ctx.x("Out@GRAD")
    if ctx.attr("pooling_type") == "max":
        # times the 0/1 mask, not a select: a non-finite incoming value spreads NaN over its window, as the kernels
        gcols = g.node("Mul", [g.node("Cast", [_first_max(ctx, geo)], to=onnx_dtype(dt)),
                               g.node("Unsqueeze", [gout, g.ints([-1])])])
        parts = unstacked(ctx, gcols, geo)
    else:
        parts = [g.node("Div", [gout, g.const(_counts(ctx, geo, dt))])] * geo.taps
    ctx.finish(scatter(ctx, parts, geo), "X@GRAD")


def pool2d_select(ctx):
    g, geo, dt = ctx.g, _pool_geometry(ctx), ctx.dtype("X")
    dcols = stacked(ctx, windows(ctx, ctx.x("D"), geo, 0.0, ctx.dtype("D")))
    picked = g.node("Mul", [dcols, g.node("Cast", [_first_max(ctx, geo)], to=onnx_dtype(dt))])
    ctx.set(reduce_node(ctx, "ReduceSum", picked, [2 + geo.dims], False, out=ctx.name()))


LOWERINGS = {"conv2d_input_grad": conv2d_input_grad, "conv2d_filter_grad": conv2d_filter_grad,
             "conv2d_transpose": conv2d_transpose, "pool2d": pool2d, "pool2d_grad": pool2d_grad,
             "pool2d_select": pool2d_select}
"""gradgen op type -> lowering, where the op's traced compute cannot serve (``OWN_EXPORTS``)."""

_READS_SHAPES = ("its compute reads the static shape of an input the export may know only in part (its batch); "
                 "the lowering reads the spatial sizes alone")
_POOL = ("the windows read the input's static spatial sizes; max pooling is MaxPool (with a second one marking "
         "the windows that hold NaN), average AveragePool where ONNX Runtime has them")
OWN_EXPORTS = {"conv2d_input_grad": _READS_SHAPES, "conv2d_filter_grad": _READS_SHAPES,
               "conv2d_transpose": _READS_SHAPES, "pool2d": _POOL, "pool2d_grad": _POOL, "pool2d_select": _POOL}
"""op type -> why an op that states its math keeps the export written here."""


def _static_spatial(slot: str):
    def check(op) -> str | None:
        shape = op.block.var(op.input(slot)[0]).shape
        if not 3 <= len(shape) <= 5 or any(d < 0 for d in shape[2:]):
            return f"{slot} must have known spatial sizes (1 to 3 of them) to export, got shape {list(shape)}"
        return None
    return check


LIMITS = {schema.type: _static_spatial("Input" if "Input" in schema.tables.inputs else "X") for schema in FAMILY}
"""op type -> check returning why this op cannot be exported, or None."""
