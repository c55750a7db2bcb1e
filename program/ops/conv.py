"""Convolution and pooling over N-C-spatial tensors (1 to 3 spatial dims; the op types keep Paddle's 2-D names),
and the ops their gradients are made of.

``conv2d_input_grad`` and ``conv2d_filter_grad`` are the two adjoints of
``conv2d``; each is bilinear, so the gradients of all three are written with
the same three op types. Pooling likewise has ``pool2d_grad`` and, for max
pooling, ``pool2d_select`` as each other's adjoints.
"""
from __future__ import annotations

import math
import operator
from functools import reduce

from ..dtypes import FLOAT_DTYPES
from ..schema import Attr, OnnxMapping, TensorType, schema

CONV_ATTRS = {"strides": Attr("ints", [1, 1]), "paddings": Attr("ints", [0, 0]), "dilations": Attr("ints", [1, 1]),
              "groups": Attr("int", 1)}
POOL_ATTRS = {"pooling_type": Attr("str", "max"), "ksize": Attr("ints"), "strides": Attr("ints", [1, 1]),
              "paddings": Attr("ints", [0, 0]), "exclusive": Attr("bool", True), "ceil_mode": Attr("bool", False),
              "dilations": Attr("ints", [1, 1])}
"""The ops take 1, 2 or 3 spatial dims (N-C-spatial input; Paddle's 2-D names stay), each attr list one entry per
spatial dim (the defaults are 2-D's). Pooling ``paddings`` is one per dim or (before, after) per dim ([top, bottom,
left, right] in 2-D); ``exclusive`` average pooling divides by the in-bounds elements of each window, otherwise by
the window's area (Paddle's rule); ``ceil_mode`` keeps a last, partial window that starts inside the input or its
leading padding; ``dilations`` spreads a pooling window's taps as a convolution's."""


def out_size(size: int, k: int, stride: int, pad: int, dilation: int = 1) -> int:
    """Output length of a window sweep; -1 stays unknown."""
    if size < 0:
        return -1
    return (size + 2 * pad - dilation * (k - 1) - 1) // stride + 1


def pool_paddings(paddings, dims: int = 2) -> tuple[int, ...]:
    """Pooling paddings as (before, after) per spatial dim: one value per dim pads both sides alike."""
    p = list(paddings)
    return tuple(v for v in p for _ in (0, 1)) if len(p) == dims else tuple(p)


def pool_out_size(size: int, k: int, stride: int, before: int, after: int, ceil_mode: bool) -> int:
    """How many pooling windows fit along one dim (``k`` the window's span); -1 stays unknown."""
    if size < 0:
        return -1
    span = size + before + after - k
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + before:  # the last window would hold only padding
        out -= 1
    return out


def _spatial(ctx, what: str, *slots: str) -> int:
    """The number of spatial dims of the slots' vars (all of one rank, 3 to 5): fails otherwise."""
    ranks = [len(ctx.input(s).shape) for s in slots]
    if len(set(ranks)) != 1 or not 3 <= ranks[0] <= 5:
        ctx.fail(f"{what} takes N-C-spatial tensors with 1 to 3 spatial dims (rank 3 to 5), all of one rank; got "
                 f"ranks {ranks} for {list(slots)}")
    return ranks[0] - 2


_WORDS = {1: "one int", 2: "two ints", 3: "three ints"}


def _per_dim(ctx, dims: int, *names):
    for n in names:
        v = ctx.attr(n)
        if len(v) != dims or any(d <= 0 for d in v) and n != "paddings" or any(d < 0 for d in v):
            ctx.fail(f"{n} must be {_WORDS[dims]} (one per spatial dim), positive (paddings: non-negative), "
                     f"got {v}")


def _sizes(shape) -> str:
    return "x".join(map(str, shape))


def _conv2d(ctx):
    x, w = ctx.input("Input"), ctx.input("Filter")
    dims = _spatial(ctx, "conv2d", "Input", "Filter")
    _per_dim(ctx, dims, "strides", "paddings", "dilations")
    g = ctx.attr("groups")
    if g <= 0 or w.shape[0] % g or (x.shape[1] >= 0 and x.shape[1] != w.shape[1] * g):
        ctx.fail(f"Input has {x.shape[1]} channels but Filter expects {w.shape[1]} per group x {g} groups "
                 f"(and {w.shape[0]} output channels must divide by the groups)")
    out = [out_size(*a) for a in zip(x.shape[2:], w.shape[2:], ctx.attr("strides"), ctx.attr("paddings"),
                                     ctx.attr("dilations"))]
    if any(o == 0 or o < -1 for o in out):
        ctx.fail(f"the {_sizes(w.shape[2:])} filter does not fit the {_sizes(x.shape[2:])} input")
    return {"Output": TensorType((x.shape[0], w.shape[0], *out), x.dtype)}


def _like(slot: str, out: str):
    def infer(ctx):
        return {out: ctx.input(slot)}

    return infer


def _pool2d(ctx):
    x = ctx.input("X")
    dims = _spatial(ctx, "pool2d", "X")
    if ctx.attr("pooling_type") not in ("max", "avg"):
        ctx.fail(f"pooling_type must be 'max' or 'avg', got {ctx.attr('pooling_type')!r}")
    _per_dim(ctx, dims, "ksize", "strides", "dilations")
    pads = list(ctx.attr("paddings"))
    if len(pads) not in (dims, 2 * dims) or min(pads) < 0:
        ctx.fail(f"paddings must be {dims} (one per dim) or {2 * dims} ((before, after) per dim) non-negative ints, "
                 f"got {pads}")
    sides, ceil = pool_paddings(pads, dims), ctx.attr("ceil_mode")
    spans = [(k - 1) * d + 1 for k, d in zip(ctx.attr("ksize"), ctx.attr("dilations"))]
    if any(max(sides[2 * i], sides[2 * i + 1]) >= span for i, span in enumerate(spans)):
        ctx.fail(f"paddings {pads} must be smaller than ksize {ctx.attr('ksize')} (dilated: {spans})")
    out = [pool_out_size(n, span, s, sides[2 * i], sides[2 * i + 1], ceil)
           for i, (n, span, s) in enumerate(zip(x.shape[2:], spans, ctx.attr("strides")))]
    if any(o == 0 or o < -1 for o in out):
        ctx.fail(f"the {_sizes(spans)} window does not fit the {_sizes(x.shape[2:])} input with paddings {pads}")
    return {"Out": TensorType((x.shape[0], x.shape[1], *out), x.dtype)}


def transposed_size(size: int, k: int, stride: int, pad: int, dilation: int, output_padding: int) -> int:
    """Output length of a transposed convolution; -1 stays unknown."""
    if size < 0:
        return -1
    return (size - 1) * stride - 2 * pad + dilation * (k - 1) + 1 + output_padding


def _conv2d_transpose(ctx):
    x, w = ctx.input("Input"), ctx.input("Filter")
    dims = _spatial(ctx, "conv2d_transpose (Filter [C_in, C_out/groups, *kernel])", "Input", "Filter")
    if x.dtype != w.dtype:
        ctx.fail(f"dtypes differ: Input is {x.dtype}, Filter is {w.dtype}")
    _per_dim(ctx, dims, "strides", "paddings", "dilations")
    g, strides, extra = ctx.attr("groups"), ctx.attr("strides"), list(ctx.attr("output_padding"))
    if g <= 0 or w.shape[0] % g or (x.shape[1] >= 0 and x.shape[1] != w.shape[0]):
        ctx.fail(f"Input has {x.shape[1]} channels but Filter has {w.shape[0]} input channels "
                 f"(which must divide into {g} groups)")
    if len(extra) != dims or not all(0 <= e < s for e, s in zip(extra, strides)):
        ctx.fail(f"output_padding {extra} must be {_WORDS[dims]}, each at least 0 and below its stride "
                 f"{list(strides)}")
    out = [transposed_size(*a) for a in zip(x.shape[2:], w.shape[2:], strides, ctx.attr("paddings"),
                                            ctx.attr("dilations"), extra)]
    if any(o == 0 or o < -1 for o in out):
        ctx.fail(f"paddings {ctx.attr('paddings')} leave no output of the {_sizes(x.shape[2:])} input")
    return {"Output": TensorType((x.shape[0], w.shape[1] * g, *out), x.dtype)}


def conv2d(xp, x, w, **window):
    return xp.convolution(x, w, **window)


def conv2d_input_grad(xp, w, gout, x, **window):
    return xp.convolution_input_adjoint(w, gout, tuple(x.shape), **window)


def conv2d_filter_grad(xp, x, gout, w, **window):
    return xp.convolution_filter_adjoint(x, gout, tuple(w.shape), **window)


def conv2d_transpose(xp, x, w, *, output_padding, **window):
    """The input adjoint of a convolution by ``w`` read as its filter [O = C_in, C_out/groups, *kernel], at the
    size the attrs give."""
    size = [transposed_size(n, k, s, p, d, e) for n, k, s, p, d, e in
            zip(x.shape[2:], w.shape[2:], window["strides"], window["paddings"], window["dilations"], output_padding)]
    return xp.convolution_input_adjoint(w, x, (x.shape[0], w.shape[1] * window["groups"], *size), **window)


# Pooling's math, once, over ``xp``. An engine supplies the window's taps (``xp.pool_taps``: one [N, C, *out]
# array per kernel position, row-major, of the input padded with a value), their adjoint (``xp.add_pool_taps``:
# shares added back where each tap reads) and an average's divisor (``xp.pool_divisor``), all read from the attrs
# as ``backend/shared/conv.Pooling`` reads them.
def _first_maxima(xp, taps) -> list:
    """Per tap a mask, True where the tap holds its window's first maximum in row-major order (a NaN being the
    maximum where the window holds one, its first NaN, as ``np.argmax`` picks): ties go to the first."""
    top = reduce(xp.maximum, taps)
    nan = xp.isnan(top)
    masks, taken = [], xp.zeros_like(nan)
    for t in taps:
        hit = ((t == top) | (nan & (t != t))) & ~taken
        taken = taken | hit
        masks.append(hit)
    return masks


def _masked(xp, mask, v):
    """``v`` on the mask, ``v * 0`` off it: a product with a 0/1 mask, so an infinite or NaN ``v`` spreads NaN
    over its window, written as a select (XLA turns a product with a converted bool into one that gives 0)."""
    return xp.where(mask, v, v * 0)


def pool2d(xp, x, *, pooling_type, exclusive, **window):
    """The window's maximum (NaN where it holds one), or its sum over the divisor."""
    if pooling_type == "max":
        return reduce(xp.maximum, xp.pool_taps(x, -math.inf, **window))
    taps = xp.pool_taps(x, 0.0, **window)
    divisor = xp.pool_divisor(x, tuple(taps[0].shape[2:]), exclusive=exclusive, **window)
    return reduce(operator.add, taps) / divisor


def pool2d_grad(xp, x, gout, *, pooling_type, exclusive, **window):
    """Out@GRAD to each window's first maximum, or spread evenly over the window."""
    if pooling_type == "max":
        shares = [_masked(xp, m, gout) for m in _first_maxima(xp, xp.pool_taps(x, -math.inf, **window))]
    else:
        share = gout / xp.pool_divisor(x, tuple(gout.shape[2:]), exclusive=exclusive, **window)
        shares = [share] * math.prod(window["ksize"])
    return xp.add_pool_taps(shares, tuple(x.shape), **window)


def pool2d_select(xp, x, d, *, pooling_type, exclusive, **window):
    """For each max window of X, D's value at X's first maximum."""
    masks = _first_maxima(xp, xp.pool_taps(x, -math.inf, **window))
    return reduce(operator.add, [_masked(xp, m, t) for m, t in zip(masks, xp.pool_taps(d, 0.0, **window))])


def _conv_from_onnx(ctx) -> None:
    """Conv -> conv2d of X by W with the node's window (pads from ``pads`` or ``auto_pad``, uneven ones applied
    to X first: ``ctx.window``) and groups, then B added per output channel where given. The export is the
    compute traced: ``xp.convolution`` is the exporter's Conv."""
    x, window = ctx.window("convolution", kernel=list(ctx.shape(1)[2:]))
    groups = int(ctx.attr("group", 1))
    ctx.out_with_channel_bias("conv2d", {"Input": x, "Filter": ctx.x(1)}, {**window, "groups": groups})


def _pool2d_select(ctx):
    x, d = ctx.input("X"), ctx.input("D")
    if d.shape != x.shape:
        ctx.fail(f"D must be shaped like X, {x.dtype}{list(x.shape)}; got {d.dtype}{list(d.shape)}")
    return _pool2d(ctx)


def _windows_times_taps(windows: str):
    """Multiply-adds of a convolution: each element of slot ``windows`` (the output for a convolution and its
    adjoints, the input for the transposed one) meets one filter's taps, C/groups x kernel."""
    def count(op, shape) -> int:
        names = op.inputs.get(windows) or op.outputs[windows]
        return math.prod(shape(names[0])) * math.prod(shape(op.inputs["Filter"][0])[1:])
    return count


_CONVOLUTION_WORK = _windows_times_taps("Output")
_ADJOINTS = ("conv2d_input_grad", "conv2d_filter_grad")


def convolution_work(block, shape) -> float:
    """Multiply-adds of ``block``'s forward convolutions in one run (``shape(name)``: a var's run-time shape,
    raising ValueError where unknown). ``inf`` where a shape is unknown, or where the block holds a
    convolution's adjoints without the convolution (its work is there but not countable as forward work)."""
    forward = [op for op in block.ops if op.type == "conv2d"]
    if not forward and any(op.type in _ADJOINTS for op in block.ops):
        return math.inf
    try:
        return float(sum(_CONVOLUTION_WORK(op, shape) for op in forward))
    except ValueError:
        return math.inf


SCHEMAS = (
    schema("conv2d", ["Input", "Filter"], ["Output"], _conv2d, CONV_ATTRS,
           doc="Cross-correlation of N-C-spatial Input (1 to 3 spatial dims; NCHW in 2-D) with an "
               "[O, C/groups, *kernel] Filter (strides, paddings, dilations, groups).",
           dtypes={"Input": FLOAT_DTYPES, "Filter": "Input"}, multiply_adds=_CONVOLUTION_WORK, compute=conv2d,
           onnx_mapping=OnnxMapping("Conv", to_onnx=None, from_onnx=_conv_from_onnx)),
    schema("conv2d_input_grad", ["Filter", "Output@GRAD", "Input"], ["Input@GRAD"], _like("Input", "Input@GRAD"),
           CONV_ATTRS, doc="conv2d's adjoint in Input (a transposed convolution); Input gives only the shape.",
           dtypes={"Filter": FLOAT_DTYPES, "Output@GRAD": "Filter", "Input": "Filter"},
           multiply_adds=_windows_times_taps("Output@GRAD"), compute=conv2d_input_grad),
    schema("conv2d_filter_grad", ["Input", "Output@GRAD", "Filter"], ["Filter@GRAD"], _like("Filter", "Filter@GRAD"),
           CONV_ATTRS, doc="conv2d's adjoint in Filter; Filter gives only the shape.",
           dtypes={"Input": FLOAT_DTYPES, "Output@GRAD": "Input", "Filter": "Input"},
           multiply_adds=_windows_times_taps("Output@GRAD"), compute=conv2d_filter_grad),
    schema("conv2d_transpose", ["Input", "Filter"], ["Output"], _conv2d_transpose,
           {**CONV_ATTRS, "output_padding": Attr("ints", [0, 0])},
           doc="The adjoint of conv2d in its input (a 'deconvolution'): N-C-spatial Input, "
               "[C_in, C_out/groups, *kernel] Filter; output_padding adds rows and columns at the far end.",
           dtypes={"Input": FLOAT_DTYPES, "Filter": "Input"}, multiply_adds=_windows_times_taps("Input"),
           compute=conv2d_transpose),
    schema("pool2d", ["X"], ["Out"], _pool2d, POOL_ATTRS,
           doc="Max or average pooling of N-C-spatial X (1 to 3 spatial dims), windows optionally dilated; "
               "average divides by the window's in-bounds elements (exclusive) or its area.",
           dtypes={"X": FLOAT_DTYPES}, compute=pool2d),
    schema("pool2d_grad", ["X", "Out@GRAD"], ["X@GRAD"], _like("X", "X@GRAD"), POOL_ATTRS,
           doc="pool2d's adjoint: Out@GRAD routed to each window's max (first on ties) or spread over it.",
           dtypes={"X": FLOAT_DTYPES, "Out@GRAD": "X"}, compute=pool2d_grad),
    schema("pool2d_select", ["X", "D"], ["Out"], _pool2d_select, POOL_ATTRS,
           doc="For each max-pool window of X, D's value where X is largest: the adjoint of max pool2d_grad.",
           dtypes={"X": FLOAT_DTYPES, "D": "X"}, compute=pool2d_select),
)



__all__ = ["CONV_ATTRS", "POOL_ATTRS", "SCHEMAS", "conv2d", "conv2d_filter_grad", "conv2d_input_grad",
           "conv2d_transpose", "convolution_work", "out_size", "pool2d", "pool2d_grad", "pool2d_select",
           "pool_out_size", "pool_paddings", "transposed_size"]
