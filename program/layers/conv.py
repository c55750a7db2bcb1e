"""Convolution and pooling layers over NCHW tensors."""
from __future__ import annotations

from ..errors import ProgramError
from ..initializer import Constant
from ..variable import Variable
from .creation import create_parameter
from .helper import append, check_var


def _pair(v, what: str) -> list[int]:
    pair = [int(v), int(v)] if isinstance(v, int) else [int(d) for d in v]
    if len(pair) != 2:
        raise ProgramError(f"{what} must be an int or a pair of ints, got {v!r}")
    return pair


def conv2d(x: Variable, num_filters: int, filter_size, stride=1, padding=0, dilation=1, groups: int = 1,
           bias: bool = True, act: str | None = None, name: str | None = None) -> Variable:
    """A 2-D convolution layer: creates its OIHW filter (Xavier) and bias (zeros) parameters."""
    check_var(x, "x")
    if len(x.shape) != 4 or x.shape[1] < 0:
        raise ProgramError(f"conv2d needs NCHW input with a known channel count, got '{x.name}' {x.type_str()}")
    kh, kw = _pair(filter_size, "filter_size")
    if x.shape[1] % groups:
        raise ProgramError(f"conv2d: {x.shape[1]} input channels do not divide into {groups} groups")
    w = create_parameter([num_filters, x.shape[1] // groups, kh, kw], x.dtype,
                         name=f"{name}.w" if name else None)
    out = append("conv2d", {"Input": x, "Filter": w},
                 {"strides": _pair(stride, "stride"), "paddings": _pair(padding, "padding"),
                  "dilations": _pair(dilation, "dilation"), "groups": groups}, out_slots=("Output",))
    if bias:
        b = create_parameter([num_filters, 1, 1], x.dtype, name=f"{name}.b" if name else None,
                             initializer=Constant(0.0))
        out = append("elementwise_add", {"X": out, "Y": b})
    if act is not None:
        out = append(act, {"X": out})
    return out


def pool2d(x: Variable, pool_size, pool_type: str = "max", stride=None, padding=0, name=None) -> Variable:
    """Max or average pooling; ``stride`` defaults to ``pool_size`` (non-overlapping windows)."""
    ksize = _pair(pool_size, "pool_size")
    return append("pool2d", {"X": check_var(x, "x")},
                  {"pooling_type": pool_type, "ksize": ksize,
                   "strides": ksize if stride is None else _pair(stride, "stride"),
                   "paddings": _pair(padding, "padding")}, name=name)


__all__ = ["conv2d", "pool2d"]
