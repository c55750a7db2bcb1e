"""``fluid.nets``: Paddle's composite layers, built from gradgen's."""
from __future__ import annotations

from gradgen.program import layers as _layers
from gradgen.program.errors import ProgramError
from gradgen.program.variable import Variable

__all__ = ["simple_img_conv_pool"]


def simple_img_conv_pool(input: Variable, num_filters: int, filter_size, pool_size, pool_stride, pool_padding=0,
                         pool_type: str = "max", global_pooling: bool = False, conv_stride=1, conv_padding=0,
                         conv_dilation=1, conv_groups: int = 1, param_attr=None, bias_attr=None, act: str | None = None,
                         use_cudnn: bool = True) -> Variable:
    """conv2d (with its activation) then pool2d, as Paddle's ``fluid.nets.simple_img_conv_pool``.

    ``global_pooling`` pools each whole feature map. gradgen's conv2d makes its own filter and bias, so
    ``param_attr`` must be None and ``bias_attr`` None or False (no bias); ``use_cudnn`` is ignored (CPU only).
    """
    if param_attr is not None or bias_attr not in (None, False):
        raise ProgramError("simple_img_conv_pool: param_attr and bias_attr (other than bias_attr=False) are not "
                           "supported; gradgen's conv2d creates its filter (Xavier) and bias (zeros) itself")
    conv = _layers.conv2d(input, num_filters, filter_size, stride=conv_stride, padding=conv_padding,
                          dilation=conv_dilation, groups=conv_groups, bias=bias_attr is not False, act=act)
    if global_pooling:
        height, width = conv.shape[2:]
        if height < 0 or width < 0:
            raise ProgramError(f"simple_img_conv_pool: global pooling needs a known height and width, got "
                               f"{list(conv.shape)}")
        pool_size, pool_stride, pool_padding = (height, width), 1, 0
    return _layers.pool2d(conv, pool_size, pool_type, stride=pool_stride, padding=pool_padding)
