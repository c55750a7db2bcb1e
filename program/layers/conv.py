"""Convolution and pooling layers over N-C-spatial tensors: 1-D (NCL), 2-D (NCHW) and 3-D (NCDHW), each one op
of the same family (``conv2d``, ``conv2d_transpose``, ``pool2d`` take 1 to 3 spatial dims)."""
from __future__ import annotations

from ..errors import ProgramError
from ..guard import default_main_program
from ..initializer import Constant
from ..variable import Variable
from .creation import create_parameter
from .helper import append, check_var
from .naming import named

_WORDS = {1: "one int", 2: "a pair of ints", 3: "three ints"}


def _per_dim(v, dims: int, what: str) -> list[int]:
    """``v`` (an int, or one int per spatial dim) as a list of ``dims`` ints."""
    values = [int(v)] * dims if isinstance(v, int) else [int(d) for d in v]
    if len(values) != dims:
        raise ProgramError(f"{what} must be an int or {_WORDS[dims]}, got {v!r}")
    return values


def _param_names(layer: str, name: str | None) -> tuple[str | None, str, str]:
    """(output name, filter name, bias name) of a conv layer, as Paddle and ``fc`` spell them:
    ``conv2d_0`` with ``conv2d_0.w_0`` and ``conv2d_0.b_0``; with ``name``: an automatic output name
    and ``name.w``, ``name.b``."""
    if name:
        return None, f"{name}.w", f"{name}.b"
    base = default_main_program().unique_name(layer)
    return base, f"{base}.w_0", f"{base}.b_0"


def _bias_and_act(out: Variable, channels: int, bias: bool, act: str | None, bias_name: str) -> Variable:
    """``out`` plus a per-channel bias parameter ``[channels]`` (zeros) if ``bias``, through activation ``act``
    if given. The bias is reshaped to ``[channels, 1, ...]`` in the program so it broadcasts along axis 1."""
    if bias:
        b = create_parameter([channels], out.dtype, name=bias_name, initializer=Constant(0.0))
        per_channel = append("reshape", {"X": b}, {"shape": [channels] + [1] * (len(out.shape) - 2)})
        out = append("elementwise_add", {"X": out, "Y": per_channel})
    if act is not None:
        out = append(act, {"X": out})
    return out


def _channels(x: Variable, dims: int, layer: str) -> int:
    check_var(x, "x")
    if len(x.shape) != dims + 2 or x.shape[1] < 0:
        layout = {1: "NCL", 2: "NCHW", 3: "NCDHW"}[dims]
        raise ProgramError(f"{layer} needs {layout} input with a known channel count, got '{x.name}' {x.type_str()}")
    return x.shape[1]


def _conv(dims: int, layer: str, x: Variable, num_filters: int, filter_size, stride, padding, dilation,
          groups: int, bias: bool, act: str | None, name: str | None) -> Variable:
    channels = _channels(x, dims, layer)
    kernel = _per_dim(filter_size, dims, "filter_size")
    if channels % groups:
        raise ProgramError(f"{layer}: {channels} input channels do not divide into {groups} groups")
    out_name, w_name, b_name = _param_names(layer, name)
    w = create_parameter([num_filters, channels // groups, *kernel], x.dtype, name=w_name)
    out = append("conv2d", {"Input": x, "Filter": w},
                 {"strides": _per_dim(stride, dims, "stride"), "paddings": _per_dim(padding, dims, "padding"),
                  "dilations": _per_dim(dilation, dims, "dilation"), "groups": groups}, out_slots=("Output",),
                 name=out_name)
    return _bias_and_act(out, num_filters, bias, act, b_name)


def _conv_transpose(dims: int, layer: str, x: Variable, num_filters: int, filter_size, stride, padding, dilation,
                    groups: int, output_padding, bias: bool, act: str | None, name: str | None) -> Variable:
    channels = _channels(x, dims, layer)
    kernel = _per_dim(filter_size, dims, "filter_size")
    if channels % groups or num_filters % groups:
        raise ProgramError(f"{layer}: {channels} input channels and {num_filters} filters must both "
                           f"divide into {groups} groups")
    out_name, w_name, b_name = _param_names(layer, name)
    w = create_parameter([channels, num_filters // groups, *kernel], x.dtype, name=w_name)
    out = append("conv2d_transpose", {"Input": x, "Filter": w},
                 {"strides": _per_dim(stride, dims, "stride"), "paddings": _per_dim(padding, dims, "padding"),
                  "dilations": _per_dim(dilation, dims, "dilation"), "groups": groups,
                  "output_padding": _per_dim(output_padding, dims, "output_padding")}, out_slots=("Output",),
                 name=out_name)
    return _bias_and_act(out, num_filters, bias, act, b_name)


def _pool(dims: int, x: Variable, pool_size, pool_type: str, stride, padding, exclusive: bool, ceil_mode: bool,
          dilation, name) -> Variable:
    ksize = _per_dim(pool_size, dims, "pool_size")
    sides = {1: "two: before, after", 2: "four: top, bottom, left, right", 3: "six: (before, after) per dim"}[dims]
    pads = [int(p) for p in padding] if not isinstance(padding, int) and len(padding) == 2 * dims else \
        _per_dim(padding, dims, f"padding (or {sides})")
    return append("pool2d", {"X": check_var(x, "x")},
                  {"pooling_type": pool_type, "ksize": ksize,
                   "strides": ksize if stride is None else _per_dim(stride, dims, "stride"),
                   "paddings": pads, "exclusive": exclusive, "ceil_mode": ceil_mode,
                   "dilations": _per_dim(dilation, dims, "dilation")}, name=name)


@named
def conv1d(x: Variable, num_filters: int, filter_size, stride=1, padding=0, dilation=1, groups: int = 1,
           bias: bool = True, act: str | None = None, name: str | None = None) -> Variable:
    """A 1-D convolution layer over NCL input: ``conv2d``'s layer for one spatial dim (filter [O, C/groups, k],
    parameters ``conv1d_0.w_0``, ``conv1d_0.b_0``, ...)."""
    return _conv(1, "conv1d", x, num_filters, filter_size, stride, padding, dilation, groups, bias, act, name)


@named
def conv2d(x: Variable, num_filters: int, filter_size, stride=1, padding=0, dilation=1, groups: int = 1,
           bias: bool = True, act: str | None = None, name: str | None = None) -> Variable:
    """A 2-D convolution layer: creates its OIHW filter (Xavier) and ``[num_filters]`` bias (zeros) parameters,
    named ``conv2d_0.w_0``, ``conv2d_0.b_0``, ... (with ``name``: ``name.w``, ``name.b``)."""
    return _conv(2, "conv2d", x, num_filters, filter_size, stride, padding, dilation, groups, bias, act, name)


@named
def conv3d(x: Variable, num_filters: int, filter_size, stride=1, padding=0, dilation=1, groups: int = 1,
           bias: bool = True, act: str | None = None, name: str | None = None) -> Variable:
    """A 3-D convolution layer over NCDHW input (filter [O, C/groups, kd, kh, kw], parameters ``conv3d_0.w_0``,
    ``conv3d_0.b_0``, ...)."""
    return _conv(3, "conv3d", x, num_filters, filter_size, stride, padding, dilation, groups, bias, act, name)


@named
def conv1d_transpose(x: Variable, num_filters: int, filter_size, stride=1, padding=0, dilation=1, groups: int = 1,
                     output_padding=0, bias: bool = True, act: str | None = None,
                     name: str | None = None) -> Variable:
    """``conv2d_transpose``'s layer for NCL input (filter [C_in, num_filters / groups, k])."""
    return _conv_transpose(1, "conv1d_transpose", x, num_filters, filter_size, stride, padding, dilation, groups,
                           output_padding, bias, act, name)


@named
def conv2d_transpose(x: Variable, num_filters: int, filter_size, stride=1, padding=0, dilation=1, groups: int = 1,
                     output_padding=0, bias: bool = True, act: str | None = None,
                     name: str | None = None) -> Variable:
    """A transposed 2-D convolution layer ("deconvolution", conv2d's adjoint in its input): creates its
    [C_in, num_filters / groups, kh, kw] filter (Xavier) and [num_filters] bias (zeros), named
    ``conv2d_transpose_0.w_0``, ``.b_0`` (with ``name``: ``name.w``, ``name.b``); the output is
    (H - 1) * stride - 2 * padding + dilation * (k - 1) + 1 + output_padding high (and likewise wide)."""
    return _conv_transpose(2, "conv2d_transpose", x, num_filters, filter_size, stride, padding, dilation, groups,
                           output_padding, bias, act, name)


@named
def conv3d_transpose(x: Variable, num_filters: int, filter_size, stride=1, padding=0, dilation=1, groups: int = 1,
                     output_padding=0, bias: bool = True, act: str | None = None,
                     name: str | None = None) -> Variable:
    """``conv2d_transpose``'s layer for NCDHW input (filter [C_in, num_filters / groups, kd, kh, kw])."""
    return _conv_transpose(3, "conv3d_transpose", x, num_filters, filter_size, stride, padding, dilation, groups,
                           output_padding, bias, act, name)


@named
def pool1d(x: Variable, pool_size, pool_type: str = "max", stride=None, padding=0, exclusive: bool = True,
           ceil_mode: bool = False, dilation=1, name=None) -> Variable:
    """``pool2d`` over NCL input; ``padding`` is an int or [before, after]."""
    return _pool(1, x, pool_size, pool_type, stride, padding, exclusive, ceil_mode, dilation, name)


@named
def pool2d(x: Variable, pool_size, pool_type: str = "max", stride=None, padding=0, exclusive: bool = True,
           ceil_mode: bool = False, name=None, dilation=1) -> Variable:
    """Max or average pooling; ``stride`` defaults to ``pool_size`` (non-overlapping windows).

    ``padding`` is an int, [h, w] or [top, bottom, left, right]. Average pooling divides by the window's
    in-bounds elements when ``exclusive``, else by its whole area. ``ceil_mode`` keeps a last, partial window;
    ``dilation`` spreads the window's taps apart.
    """
    return _pool(2, x, pool_size, pool_type, stride, padding, exclusive, ceil_mode, dilation, name)


@named
def pool3d(x: Variable, pool_size, pool_type: str = "max", stride=None, padding=0, exclusive: bool = True,
           ceil_mode: bool = False, dilation=1, name=None) -> Variable:
    """``pool2d`` over NCDHW input; ``padding`` is an int, three, or six ((before, after) per dim)."""
    return _pool(3, x, pool_size, pool_type, stride, padding, exclusive, ceil_mode, dilation, name)


__all__ = ["conv1d", "conv2d", "conv3d", "conv1d_transpose", "conv2d_transpose", "conv3d_transpose",
           "pool1d", "pool2d", "pool3d"]
