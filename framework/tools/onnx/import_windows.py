"""ONNX's window conventions, read once for the nodes that sweep windows (Conv, ConvTranspose, MaxPool,
AveragePool): the spatial dims, ``pads`` or ``auto_pad``, uneven pads applied to the input first; and a bias per
channel added after the op. ``NodeContext.window`` and ``NodeContext.out_with_channel_bias`` are these, so that an
op's ``from_onnx`` beside its schema (``program/ops/conv.py``) reads as the node's formula."""
from __future__ import annotations

from .errors import NotImportable
from .import_ops import padded

__all__ = ["evenly_padded", "onnx_pads", "out_with_channel_bias", "spatial_dims", "window"]


def spatial_dims(ctx, what: str) -> int:
    """The spatial dims of input 0: 1 to 3 (gradgen's conv and pool ops take those)."""
    if not 3 <= ctx.rank(0) <= 5:
        raise NotImportable(f"{what} over {ctx.rank(0) - 2} spatial dims (gradgen has 1 to 3)")
    return ctx.rank(0) - 2


def onnx_pads(ctx, kernel: list[int], dilations: list[int]) -> list[int]:
    """ONNX pads (all begins, then all ends) from ``pads`` or ``auto_pad`` (SAME_* needs the spatial sizes)."""
    dims, mode = len(kernel), ctx.attr("auto_pad", "NOTSET")
    if mode in ("NOTSET", "VALID"):
        return ctx.attr_ints("pads", [0] * 2 * dims, 2 * dims) if mode == "NOTSET" else [0] * 2 * dims
    size = ctx.shape(0)[2:]
    if -1 in size:
        raise NotImportable(f"auto_pad={mode} on an input of unknown spatial size")
    strides = ctx.attr_ints("strides", [1] * dims, dims)
    begins, ends = [], []
    for n, k, s, d in zip(size, kernel, strides, dilations):
        total = max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0)
        small = total // 2
        begins.append(total - small if mode == "SAME_LOWER" else small)
        ends.append(small if mode == "SAME_LOWER" else total - small)
    return begins + ends


def evenly_padded(ctx, x: str, pads: list[int], value: float) -> tuple[str, list[int]]:
    """Symmetric pads stay the op's ``paddings``; other pads are applied to ``x`` first."""
    dims = len(pads) // 2
    if pads[:dims] == pads[dims:]:
        return x, pads[:dims]
    return padded(ctx, x, list(range(2, 2 + dims)), pads, value), [0] * dims


def window(ctx, what: str, kernel: list[int]) -> tuple[str, dict]:
    """Input 0 (padded first where the node's pads are uneven) and the window attrs of a convolution over it
    (``strides``, ``paddings``, ``dilations``), ``kernel`` the filter's spatial sizes, which the node's
    ``kernel_shape`` must repeat where given."""
    dims = spatial_dims(ctx, what)
    if ctx.attr_ints("kernel_shape", kernel) != kernel:
        raise NotImportable(f"kernel_shape {ctx.attr_ints('kernel_shape')} differs from the filter's {kernel}")
    dilations = ctx.attr_ints("dilations", [1] * dims, dims)
    x, paddings = evenly_padded(ctx, ctx.x(0), onnx_pads(ctx, kernel, dilations), 0.0)
    return x, {"strides": ctx.attr_ints("strides", [1] * dims, dims), "paddings": paddings, "dilations": dilations}


def out_with_channel_bias(ctx, op_type: str, inputs: dict, attrs: dict, slot: str = "Output") -> str:
    """The op ``op_type``, plus input 2 (a bias per channel) where the node has it: the node's output 0."""
    if not ctx.has(2):
        return ctx.out(op_type, inputs, attrs, slot=slot)
    y = ctx.tmp(op_type, inputs, attrs, slot=slot)
    bias = ctx.tmp("reshape", {"X": ctx.x(2)}, {"shape": [-1] + [1] * (ctx.rank(0) - 2)})
    return ctx.out("elementwise_add", {"X": y, "Y": bias})
