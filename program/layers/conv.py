"""Convolution and pooling layers over NCHW tensors."""
from __future__ import annotations

from ..errors import ProgramError
from ..guard import default_main_program
from ..initializer import Constant
from ..variable import Variable
from .creation import create_parameter
from .helper import append, check_var


def _pair(v, what: str) -> list[int]:
    pair = [int(v), int(v)] if isinstance(v, int) else [int(d) for d in v]
    if len(pair) != 2:
        raise ProgramError(f"{what} must be an int or a pair of ints, got {v!r}")
    return pair


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
    if given. The bias is reshaped to ``[channels, 1, 1]`` in the program so it broadcasts along axis 1."""
    if bias:
        b = create_parameter([channels], out.dtype, name=bias_name, initializer=Constant(0.0))
        per_channel = append("reshape", {"X": b}, {"shape": [channels, 1, 1]})
        out = append("elementwise_add", {"X": out, "Y": per_channel})
    if act is not None:
        out = append(act, {"X": out})
    return out


def conv2d(x: Variable, num_filters: int, filter_size, stride=1, padding=0, dilation=1, groups: int = 1,
           bias: bool = True, act: str | None = None, name: str | None = None) -> Variable:
    """A 2-D convolution layer: creates its OIHW filter (Xavier) and ``[num_filters]`` bias (zeros) parameters,
    named ``conv2d_0.w_0``, ``conv2d_0.b_0``, ... (with ``name``: ``name.w``, ``name.b``)."""
    check_var(x, "x")
    if len(x.shape) != 4 or x.shape[1] < 0:
        raise ProgramError(f"conv2d needs NCHW input with a known channel count, got '{x.name}' {x.type_str()}")
    kh, kw = _pair(filter_size, "filter_size")
    if x.shape[1] % groups:
        raise ProgramError(f"conv2d: {x.shape[1]} input channels do not divide into {groups} groups")
    out_name, w_name, b_name = _param_names("conv2d", name)
    w = create_parameter([num_filters, x.shape[1] // groups, kh, kw], x.dtype, name=w_name)
    out = append("conv2d", {"Input": x, "Filter": w},
                 {"strides": _pair(stride, "stride"), "paddings": _pair(padding, "padding"),
                  "dilations": _pair(dilation, "dilation"), "groups": groups}, out_slots=("Output",),
                 name=out_name)
    return _bias_and_act(out, num_filters, bias, act, b_name)


def conv2d_transpose(x: Variable, num_filters: int, filter_size, stride=1, padding=0, dilation=1, groups: int = 1,
                     output_padding=0, bias: bool = True, act: str | None = None,
                     name: str | None = None) -> Variable:
    """A transposed 2-D convolution layer ("deconvolution", conv2d's adjoint in its input): creates its
    [C_in, num_filters / groups, kh, kw] filter (Xavier) and [num_filters] bias (zeros), named
    ``conv2d_transpose_0.w_0``, ``.b_0`` (with ``name``: ``name.w``, ``name.b``); the output is
    (H - 1) * stride - 2 * padding + dilation * (k - 1) + 1 + output_padding high (and likewise wide)."""
    check_var(x, "x")
    if len(x.shape) != 4 or x.shape[1] < 0:
        raise ProgramError(f"conv2d_transpose needs NCHW input with a known channel count, got '{x.name}' "
                           f"{x.type_str()}")
    kh, kw = _pair(filter_size, "filter_size")
    if x.shape[1] % groups or num_filters % groups:
        raise ProgramError(f"conv2d_transpose: {x.shape[1]} input channels and {num_filters} filters must both "
                           f"divide into {groups} groups")
    out_name, w_name, b_name = _param_names("conv2d_transpose", name)
    w = create_parameter([x.shape[1], num_filters // groups, kh, kw], x.dtype, name=w_name)
    out = append("conv2d_transpose", {"Input": x, "Filter": w},
                 {"strides": _pair(stride, "stride"), "paddings": _pair(padding, "padding"),
                  "dilations": _pair(dilation, "dilation"), "groups": groups,
                  "output_padding": _pair(output_padding, "output_padding")}, out_slots=("Output",),
                 name=out_name)
    return _bias_and_act(out, num_filters, bias, act, b_name)


def pool2d(x: Variable, pool_size, pool_type: str = "max", stride=None, padding=0, exclusive: bool = True,
           ceil_mode: bool = False, name=None) -> Variable:
    """Max or average pooling; ``stride`` defaults to ``pool_size`` (non-overlapping windows).

    ``padding`` is an int, [h, w] or [top, bottom, left, right]. Average pooling divides by the window's
    in-bounds elements when ``exclusive``, else by its whole area. ``ceil_mode`` keeps a last, partial window.
    """
    ksize = _pair(pool_size, "pool_size")
    pads = [int(p) for p in padding] if not isinstance(padding, int) and len(padding) == 4 else \
        _pair(padding, "padding (or four: top, bottom, left, right)")
    return append("pool2d", {"X": check_var(x, "x")},
                  {"pooling_type": pool_type, "ksize": ksize,
                   "strides": ksize if stride is None else _pair(stride, "stride"),
                   "paddings": pads, "exclusive": exclusive, "ceil_mode": ceil_mode}, name=name)


__all__ = ["conv2d", "conv2d_transpose", "pool2d"]
