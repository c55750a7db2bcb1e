"""2-D convolution and pooling over NCHW tensors, and the ops their gradients are made of.

``conv2d_input_grad`` and ``conv2d_filter_grad`` are the two adjoints of
``conv2d``; each is bilinear, so the gradients of all three are written with
the same three op types. Pooling likewise has ``pool2d_grad`` and, for max
pooling, ``pool2d_select`` as each other's adjoints.
"""
from __future__ import annotations

from ..dtypes import FLOAT_DTYPES
from ..schema import Attr, TensorType, schema

CONV_ATTRS = {"strides": Attr("ints", [1, 1]), "paddings": Attr("ints", [0, 0]), "dilations": Attr("ints", [1, 1]),
              "groups": Attr("int", 1)}
POOL_ATTRS = {"pooling_type": Attr("str", "max"), "ksize": Attr("ints"), "strides": Attr("ints", [1, 1]),
              "paddings": Attr("ints", [0, 0]), "exclusive": Attr("bool", True), "ceil_mode": Attr("bool", False)}
"""``paddings`` is [h, w] or [top, bottom, left, right]; ``exclusive`` average pooling divides by the in-bounds
elements of each window, otherwise by the window's area (Paddle's rule); ``ceil_mode`` keeps a last, partial window
that starts inside the input or its leading padding."""


def out_size(size: int, k: int, stride: int, pad: int, dilation: int = 1) -> int:
    """Output length of a window sweep; -1 stays unknown."""
    if size < 0:
        return -1
    return (size + 2 * pad - dilation * (k - 1) - 1) // stride + 1


def pool_paddings(paddings) -> tuple[int, int, int, int]:
    """Pooling paddings as (top, bottom, left, right): [h, w] pads both sides alike."""
    p = list(paddings)
    return (p[0], p[0], p[1], p[1]) if len(p) == 2 else tuple(p)


def pool_out_size(size: int, k: int, stride: int, before: int, after: int, ceil_mode: bool) -> int:
    """How many pooling windows fit along one dim; -1 stays unknown."""
    if size < 0:
        return -1
    span = size + before + after - k
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + before:  # the last window would hold only padding
        out -= 1
    return out


def _pairs(ctx, *names):
    for n in names:
        v = ctx.attr(n)
        if len(v) != 2 or any(d <= 0 for d in v) and n != "paddings" or any(d < 0 for d in v):
            ctx.fail(f"{n} must be two positive integers (paddings: non-negative), got {v}")


def _conv2d(ctx):
    x, w = ctx.input("Input"), ctx.input("Filter")
    if len(x.shape) != 4 or len(w.shape) != 4:
        ctx.fail(f"conv2d takes NCHW input and OIHW filter (rank 4), got ranks {len(x.shape)} and {len(w.shape)}")
    _pairs(ctx, "strides", "paddings", "dilations")
    g = ctx.attr("groups")
    if g <= 0 or w.shape[0] % g or (x.shape[1] >= 0 and x.shape[1] != w.shape[1] * g):
        ctx.fail(f"Input has {x.shape[1]} channels but Filter expects {w.shape[1]} per group x {g} groups "
                 f"(and {w.shape[0]} output channels must divide by the groups)")
    (sh, sw), (ph, pw), (dh, dw) = ctx.attr("strides"), ctx.attr("paddings"), ctx.attr("dilations")
    oh, ow = out_size(x.shape[2], w.shape[2], sh, ph, dh), out_size(x.shape[3], w.shape[3], sw, pw, dw)
    if oh == 0 or ow == 0 or oh < -1 or ow < -1:
        ctx.fail(f"the {w.shape[2]}x{w.shape[3]} filter does not fit the {x.shape[2]}x{x.shape[3]} input")
    return {"Output": TensorType((x.shape[0], w.shape[0], oh, ow), x.dtype)}


def _like(slot: str, out: str):
    def infer(ctx):
        return {out: ctx.input(slot)}

    return infer


def _pool2d(ctx):
    x = ctx.input("X")
    if len(x.shape) != 4:
        ctx.fail(f"pool2d takes NCHW input (rank 4), got rank {len(x.shape)}")
    if ctx.attr("pooling_type") not in ("max", "avg"):
        ctx.fail(f"pooling_type must be 'max' or 'avg', got {ctx.attr('pooling_type')!r}")
    _pairs(ctx, "ksize", "strides")
    pads = list(ctx.attr("paddings"))
    if len(pads) not in (2, 4) or min(pads) < 0:
        ctx.fail(f"paddings must be 2 ([h, w]) or 4 ([top, bottom, left, right]) non-negative ints, got {pads}")
    (kh, kw), (sh, sw), (pt, pb, pl, pr) = ctx.attr("ksize"), ctx.attr("strides"), pool_paddings(pads)
    if max(pt, pb) >= kh or max(pl, pr) >= kw:
        ctx.fail(f"paddings {pads} must be smaller than ksize {[kh, kw]}")
    ceil = ctx.attr("ceil_mode")
    oh, ow = pool_out_size(x.shape[2], kh, sh, pt, pb, ceil), pool_out_size(x.shape[3], kw, sw, pl, pr, ceil)
    if oh == 0 or ow == 0 or oh < -1 or ow < -1:
        ctx.fail(f"the {kh}x{kw} window does not fit the {x.shape[2]}x{x.shape[3]} input with paddings {pads}")
    return {"Out": TensorType((x.shape[0], x.shape[1], oh, ow), x.dtype)}


def transposed_size(size: int, k: int, stride: int, pad: int, dilation: int, output_padding: int) -> int:
    """Output length of a transposed convolution; -1 stays unknown."""
    if size < 0:
        return -1
    return (size - 1) * stride - 2 * pad + dilation * (k - 1) + 1 + output_padding


def _conv2d_transpose(ctx):
    x, w = ctx.input("Input"), ctx.input("Filter")
    if len(x.shape) != 4 or len(w.shape) != 4:
        ctx.fail(f"conv2d_transpose takes NCHW input and [C_in, C_out/groups, kh, kw] filter (rank 4), got ranks "
                 f"{len(x.shape)} and {len(w.shape)}")
    if x.dtype != w.dtype:
        ctx.fail(f"dtypes differ: Input is {x.dtype}, Filter is {w.dtype}")
    _pairs(ctx, "strides", "paddings", "dilations")
    g, strides, extra = ctx.attr("groups"), ctx.attr("strides"), list(ctx.attr("output_padding"))
    if g <= 0 or w.shape[0] % g or (x.shape[1] >= 0 and x.shape[1] != w.shape[0]):
        ctx.fail(f"Input has {x.shape[1]} channels but Filter has {w.shape[0]} input channels "
                 f"(which must divide into {g} groups)")
    if len(extra) != 2 or not all(0 <= e < s for e, s in zip(extra, strides)):
        ctx.fail(f"output_padding {extra} must be two ints, each at least 0 and below its stride {list(strides)}")
    (ph, pw), (dh, dw) = ctx.attr("paddings"), ctx.attr("dilations")
    oh = transposed_size(x.shape[2], w.shape[2], strides[0], ph, dh, extra[0])
    ow = transposed_size(x.shape[3], w.shape[3], strides[1], pw, dw, extra[1])
    if oh == 0 or ow == 0 or oh < -1 or ow < -1:
        ctx.fail(f"paddings {[ph, pw]} leave no output of the {x.shape[2]}x{x.shape[3]} input")
    return {"Output": TensorType((x.shape[0], w.shape[1] * g, oh, ow), x.dtype)}


def _pool2d_select(ctx):
    x, d = ctx.input("X"), ctx.input("D")
    if d.shape != x.shape:
        ctx.fail(f"D must be shaped like X, {x.dtype}{list(x.shape)}; got {d.dtype}{list(d.shape)}")
    return _pool2d(ctx)


SCHEMAS = (
    schema("conv2d", ["Input", "Filter"], ["Output"], _conv2d, CONV_ATTRS,
           doc="2-D cross-correlation of NCHW Input with OIHW Filter (strides, paddings, dilations, groups).",
           dtypes={"Input": FLOAT_DTYPES, "Filter": "Input"}),
    schema("conv2d_input_grad", ["Filter", "Output@GRAD", "Input"], ["Input@GRAD"], _like("Input", "Input@GRAD"),
           CONV_ATTRS, doc="conv2d's adjoint in Input (a transposed convolution); Input gives only the shape.",
           dtypes={"Filter": FLOAT_DTYPES, "Output@GRAD": "Filter", "Input": "Filter"}),
    schema("conv2d_filter_grad", ["Input", "Output@GRAD", "Filter"], ["Filter@GRAD"], _like("Filter", "Filter@GRAD"),
           CONV_ATTRS, doc="conv2d's adjoint in Filter; Filter gives only the shape.",
           dtypes={"Input": FLOAT_DTYPES, "Output@GRAD": "Input", "Filter": "Input"}),
    schema("conv2d_transpose", ["Input", "Filter"], ["Output"], _conv2d_transpose,
           {**CONV_ATTRS, "output_padding": Attr("ints", [0, 0])},
           doc="The adjoint of conv2d in its input (a 'deconvolution'): NCHW Input, [C_in, C_out/groups, kh, kw] "
               "Filter; output_padding adds rows and columns at the far end.",
           dtypes={"Input": FLOAT_DTYPES, "Filter": "Input"}),
    schema("pool2d", ["X"], ["Out"], _pool2d, POOL_ATTRS,
           doc="Max or average pooling of NCHW X; average divides by the window's in-bounds elements (exclusive) or "
               "its area.", dtypes={"X": FLOAT_DTYPES}),
    schema("pool2d_grad", ["X", "Out@GRAD"], ["X@GRAD"], _like("X", "X@GRAD"), POOL_ATTRS,
           doc="pool2d's adjoint: Out@GRAD routed to each window's max (first on ties) or spread over it.",
           dtypes={"X": FLOAT_DTYPES, "Out@GRAD": "X"}),
    schema("pool2d_select", ["X", "D"], ["Out"], _pool2d_select, POOL_ATTRS,
           doc="For each max-pool window of X, D's value where X is largest: the adjoint of max pool2d_grad.",
           dtypes={"X": FLOAT_DTYPES, "D": "X"}),
)


__all__ = ["CONV_ATTRS", "POOL_ATTRS", "out_size", "pool_paddings", "pool_out_size", "transposed_size", "SCHEMAS"]
