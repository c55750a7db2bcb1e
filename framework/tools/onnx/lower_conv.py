"""Lowerings of convolution and pooling, forward and grad, as windows: strided ``Slice``s of the padded input.

ONNX Runtime's CPU ``Conv``, ``ConvTranspose`` and ``AveragePool`` run float32 only, so float32
``conv2d`` and average pooling and every max pooling (``MaxPool`` runs float64) use the standard
ops, and the rest is built from ``Pad``, ``Slice``, ``Einsum`` and reductions, which run in float64 too.
Window k = (i, j) of an NCHW input is ``xpad[:, :, i*dh :: sh, j*dw :: sw]`` cut to the output size;
the grad ops scatter window gradients back by the adjoint: upsample by the stride with zeros and pad
into place. The input's height and width must be known when exporting (``LIMITS`` says so).
"""
from __future__ import annotations

import numpy as np

from gradgen.program.ops.conv import pool_out_size, pool_paddings, transposed_size

from .context import Lowering
from .graph import onnx_dtype
from .lower_math import reduce_node

__all__ = ["LOWERINGS", "LIMITS"]


class Geometry:
    """Kernel, strides, paddings (four sides, plus ceil mode's extra far-end rows and columns), dilations and the
    static input and output sizes of one windowed op. ``size`` overrides the input's height and width (the output
    of a transposed convolution); ``out`` gives the output's (pooling, whose ceil mode the var shape knows)."""

    def __init__(self, ctx: Lowering, x_slot: str, kh: int, kw: int, size=None, out=None):
        op = ctx.op
        self.kh, self.kw = kh, kw
        self.sh, self.sw = op.attr("strides")
        self.pt, self.pb, self.pl, self.pr = pool_paddings(op.attr("paddings"))
        self.dh, self.dw = op.attr("dilations") if "dilations" in op.attrs else (1, 1)
        self.h, self.w = size or ctx.var(x_slot).shape[2:]
        self.oh = (self.h + self.pt + self.pb - (self.kh - 1) * self.dh - 1) // self.sh + 1
        self.ow = (self.w + self.pl + self.pr - (self.kw - 1) * self.dw - 1) // self.sw + 1
        if out is not None:
            self.oh, self.ow = out
        # rows and columns past the far padding that the last windows reach (pooling's ceil mode)
        self.eh = max(0, (self.oh - 1) * self.sh + (self.kh - 1) * self.dh + 1 - (self.h + self.pt + self.pb))
        self.ew = max(0, (self.ow - 1) * self.sw + (self.kw - 1) * self.dw + 1 - (self.w + self.pl + self.pr))

    @property
    def padded(self) -> bool:
        return any((self.pt, self.pb, self.pl, self.pr, self.eh, self.ew))

    def pads(self) -> list[int]:
        """ONNX Pad amounts of the spatial dims of an NCHW array, extra rows included."""
        return [0, 0, self.pt, self.pl, 0, 0, self.pb + self.eh, self.pr + self.ew]

    def offsets(self):
        return [(i * self.dh, j * self.dw) for i in range(self.kh) for j in range(self.kw)]


def windows(ctx: Lowering, x: str, geo: Geometry, pad_value: float, dtype: str) -> list[str]:
    """The kh*kw window views of ``x``, each [N, C, OH, OW]."""
    g = ctx.g
    if geo.padded:
        x = g.node("Pad", [x, g.ints(geo.pads()), ctx.scalar(pad_value, dtype)])
    parts = []
    for di, dj in geo.offsets():
        ends = [di + geo.sh * (geo.oh - 1) + 1, dj + geo.sw * (geo.ow - 1) + 1]
        parts.append(g.node("Slice", [x, g.ints([di, dj]), g.ints(ends), g.ints([2, 3]), g.ints([geo.sh, geo.sw])]))
    return parts


def stacked(ctx: Lowering, parts: list[str]) -> str:
    """Window views stacked on a new last axis: [N, C, OH, OW, K]."""
    return ctx.g.node("Concat", [ctx.g.node("Unsqueeze", [p, ctx.g.ints([-1])]) for p in parts], axis=-1)


def unstacked(ctx: Lowering, cols: str, k: int) -> list[str]:
    return [ctx.g.node("Gather", [cols, ctx.g.const(np.int64(i))], axis=4) for i in range(k)]


def scatter(ctx: Lowering, parts: list[str], geo: Geometry) -> str:
    """The adjoint of ``windows``: sum window gradients [N, C, OH, OW] back into an [N, C, H, W] array."""
    g = ctx.g
    hp, wp = geo.h + geo.pt + geo.pb + geo.eh, geo.w + geo.pl + geo.pr + geo.ew
    span_h, span_w = geo.sh * (geo.oh - 1) + 1, geo.sw * (geo.ow - 1) + 1
    total = None
    for part, (di, dj) in zip(parts, geo.offsets()):
        up = part
        if geo.sh > 1 or geo.sw > 1:  # put sh-1 / sw-1 zeros after every row / column
            up = g.node("Unsqueeze", [up, g.ints([3, 5])])
            up = g.node("Pad", [up, g.ints([0] * 6 + [0, 0, 0, geo.sh - 1, 0, geo.sw - 1])])
            up = g.node("Reshape", [up, g.ints([0, 0, geo.oh * geo.sh, geo.ow * geo.sw])])
            up = g.node("Slice", [up, g.ints([0, 0]), g.ints([span_h, span_w]), g.ints([2, 3])])
        placed = g.node("Pad", [up, g.ints([0, 0, di, dj, 0, 0, hp - di - span_h, wp - dj - span_w])])
        total = placed if total is None else g.node("Add", [total, placed])
    if geo.padded:
        total = g.node("Slice", [total, g.ints([geo.pt, geo.pl]), g.ints([geo.pt + geo.h, geo.pl + geo.w]),
                                 g.ints([2, 3])])
    return total


def _groups(ctx: Lowering, value: str, axis: int, size: int, groups: int) -> list[str]:
    if groups == 1:
        return [value]
    return [ctx.g.node("Slice", [value, ctx.g.ints([k * size]), ctx.g.ints([(k + 1) * size]), ctx.g.ints([axis])])
            for k in range(groups)]


def _filter_shape(ctx: Lowering):
    o, cg, kh, kw = ctx.var("Filter").shape
    return o, cg, kh, kw, ctx.attr("groups")


def _filters(ctx: Lowering, o, cg, kh, kw, groups) -> list[str]:
    """The filter per group as [O/G, C/G, K]."""
    return [ctx.g.node("Reshape", [w, ctx.g.ints([o // groups, cg, kh * kw])])
            for w in _groups(ctx, ctx.x("Filter"), 0, o // groups, groups)]


def conv2d(ctx):
    o, cg, kh, kw, groups = _filter_shape(ctx)
    geo = Geometry(ctx, "Input", kh, kw)
    if ctx.dtype("Input") == "float32":  # ONNX Runtime's Conv runs float32: the standard op, readable anywhere
        return ctx.emit("Conv", [ctx.x("Input"), ctx.x("Filter")], slot="Output", kernel_shape=[kh, kw],
                        strides=[geo.sh, geo.sw], pads=[geo.pt, geo.pl, geo.pb, geo.pr], dilations=[geo.dh, geo.dw],
                        group=groups)
    cols = stacked(ctx, windows(ctx, ctx.x("Input"), geo, 0.0, ctx.dtype("Input")))
    outs = [ctx.g.node("Einsum", [c, w], equation="nchwk,ock->nohw")
            for c, w in zip(_groups(ctx, cols, 1, cg, groups), _filters(ctx, o, cg, kh, kw, groups))]
    ctx.emit("Concat", outs, slot="Output", axis=1) if groups > 1 else ctx.finish(outs[0], "Output")


def conv2d_input_grad(ctx):
    o, cg, kh, kw, groups = _filter_shape(ctx)
    geo = Geometry(ctx, "Input", kh, kw)
    ctx.finish(_spread(ctx, geo, ctx.x("Output@GRAD"), o, cg, kh, kw, groups), "Input@GRAD")


def conv2d_transpose(ctx):
    # conv2d_input_grad of the filter read as a conv2d filter [O = C_in, C_out/groups, kh, kw], at the output size
    o, cg, kh, kw, groups = _filter_shape(ctx)
    size = [transposed_size(d, k, s, p, dl, e) for d, k, s, p, dl, e in
            zip(ctx.var("Input").shape[2:], (kh, kw), ctx.attr("strides"), ctx.attr("paddings"),
                ctx.attr("dilations"), ctx.attr("output_padding"))]
    geo = Geometry(ctx, "Input", kh, kw, size=size)
    ctx.finish(_spread(ctx, geo, ctx.x("Input"), o, cg, kh, kw, groups), "Output")


def _spread(ctx: Lowering, geo: Geometry, gout: str, o, cg, kh, kw, groups) -> str:
    """conv2d's adjoint in its input: ``gout`` [N, O, OH, OW] spread back over [N, C, H, W]."""
    gouts = _groups(ctx, gout, 1, o // groups, groups)
    gcols = [ctx.g.node("Einsum", [go, w], equation="nohw,ock->nchwk")
             for go, w in zip(gouts, _filters(ctx, o, cg, kh, kw, groups))]
    gcols = ctx.g.node("Concat", gcols, axis=1) if groups > 1 else gcols[0]
    return scatter(ctx, unstacked(ctx, gcols, kh * kw), geo)


def conv2d_filter_grad(ctx):
    o, cg, kh, kw, groups = _filter_shape(ctx)
    geo = Geometry(ctx, "Input", kh, kw)
    cols = stacked(ctx, windows(ctx, ctx.x("Input"), geo, 0.0, ctx.dtype("Input")))
    gouts = _groups(ctx, ctx.x("Output@GRAD"), 1, o // groups, groups)
    parts = [ctx.g.node("Reshape", [ctx.g.node("Einsum", [c, go], equation="nchwk,nohw->ock"),
                                    ctx.g.ints([o // groups, cg, kh, kw])])
             for c, go in zip(_groups(ctx, cols, 1, cg, groups), gouts)]
    ctx.emit("Concat", parts, slot="Filter@GRAD", axis=0) if groups > 1 else ctx.finish(parts[0], "Filter@GRAD")


def _pool_geometry(ctx: Lowering) -> Geometry:
    kh, kw = ctx.attr("ksize")
    x = ctx.var("X").shape
    sides = pool_paddings(ctx.attr("paddings"))
    out = [pool_out_size(d, k, s, before, after, ctx.attr("ceil_mode"))
           for d, k, s, before, after in zip(x[2:], (kh, kw), ctx.attr("strides"), sides[::2], sides[1::2])]
    return Geometry(ctx, "X", kh, kw, out=out)


def _counts(ctx: Lowering, geo: Geometry, dtype: str) -> np.ndarray:
    """The divisor of each average window, [1, 1, OH, OW]: its in-bounds elements (``exclusive``) or its area."""
    if not ctx.attr("exclusive"):
        return np.full((1, 1, geo.oh, geo.ow), geo.kh * geo.kw, dtype=dtype)
    ones = np.pad(np.ones((geo.h, geo.w)), ((geo.pt, geo.pb + geo.eh), (geo.pl, geo.pr + geo.ew)))
    counts = np.zeros((geo.oh, geo.ow))
    for di, dj in geo.offsets():
        counts += ones[di: di + geo.sh * (geo.oh - 1) + 1: geo.sh, dj: dj + geo.sw * (geo.ow - 1) + 1: geo.sw]
    return counts.reshape(1, 1, geo.oh, geo.ow).astype(dtype)


def _first_max(ctx: Lowering, geo: Geometry) -> str:
    """[N, C, OH, OW, K] bools marking the first maximum of each window of X."""
    g = ctx.g
    cols = stacked(ctx, windows(ctx, ctx.x("X"), geo, -np.inf, ctx.dtype("X")))
    best = g.node("ArgMax", [cols], axis=4, keepdims=1, select_last_index=0)
    return g.node("Equal", [best, g.const(np.arange(geo.kh * geo.kw, dtype=np.int64))])


def pool2d(ctx):
    geo, dt = _pool_geometry(ctx), ctx.dtype("X")
    standard = {"kernel_shape": [geo.kh, geo.kw], "strides": [geo.sh, geo.sw],
                "pads": [geo.pt, geo.pl, geo.pb, geo.pr]}
    maximum = ctx.attr("pooling_type") == "max"
    if not ctx.attr("ceil_mode"):  # ONNX's ceil mode keeps other last windows than Paddle's: windows then
        if maximum:  # MaxPool ignores padding, as the kernel's -inf padding does
            return ctx.emit("MaxPool", [ctx.x("X")], **standard)
        if dt == "float32":
            return ctx.emit("AveragePool", [ctx.x("X")], count_include_pad=int(not ctx.attr("exclusive")), **standard)
    cols = stacked(ctx, windows(ctx, ctx.x("X"), geo, -np.inf if maximum else 0.0, dt))
    if maximum:
        return ctx.set(reduce_node(ctx, "ReduceMax", cols, [4], False, out=ctx.name()))
    total = reduce_node(ctx, "ReduceSum", cols, [4], False)
    ctx.emit("Div", [total, ctx.g.const(_counts(ctx, geo, dt))])


def pool2d_grad(ctx):
    g, geo, dt = ctx.g, _pool_geometry(ctx), ctx.dtype("X")
    gout = ctx.x("Out@GRAD")
    if ctx.attr("pooling_type") == "max":
        gcols = g.node("Where", [_first_max(ctx, geo), g.node("Unsqueeze", [gout, g.ints([-1])]), ctx.scalar(0.0, dt)])
        parts = unstacked(ctx, gcols, geo.kh * geo.kw)
    else:
        parts = [g.node("Div", [gout, g.const(_counts(ctx, geo, dt))])] * (geo.kh * geo.kw)
    ctx.finish(scatter(ctx, parts, geo), "X@GRAD")


def pool2d_select(ctx):
    g, geo, dt = ctx.g, _pool_geometry(ctx), ctx.dtype("X")
    dcols = stacked(ctx, windows(ctx, ctx.x("D"), geo, 0.0, ctx.dtype("D")))
    picked = g.node("Mul", [dcols, g.node("Cast", [_first_max(ctx, geo)], to=onnx_dtype(dt))])
    ctx.set(reduce_node(ctx, "ReduceSum", picked, [4], False, out=ctx.name()))


LOWERINGS = {"conv2d": conv2d, "conv2d_input_grad": conv2d_input_grad, "conv2d_filter_grad": conv2d_filter_grad,
             "conv2d_transpose": conv2d_transpose, "pool2d": pool2d, "pool2d_grad": pool2d_grad,
             "pool2d_select": pool2d_select}
"""gradgen op type -> lowering."""


def _static_spatial(slot: str):
    def check(op) -> str | None:
        shape = op.block.var(op.input(slot)[0]).shape
        if len(shape) != 4 or any(d < 0 for d in shape[2:]):
            return f"{slot} must have a known height and width to export, got shape {list(shape)}"
        return None
    return check


LIMITS = {"conv2d": _static_spatial("Input"), "conv2d_input_grad": _static_spatial("Input"),
          "conv2d_filter_grad": _static_spatial("Input"), "conv2d_transpose": _static_spatial("Input"),
          "pool2d": _static_spatial("X"), "pool2d_grad": _static_spatial("X"), "pool2d_select": _static_spatial("X")}
"""op type -> check returning why this op cannot be exported, or None."""
