"""Stride-1 2-D convolutions as sums of shifted products: no column matrix.

With stride 1 and no dilation, tap (dy, dx) of a kernel meets the padded image
at a fixed offset. Lay the padded image out flat per channel, [C, Hp*Wp], and
compute the output as wide as the padded image, [O, Ho*Wp] (the last kw-1
columns of each row are thrown away): tap (dy, dx) then reads one contiguous
run per channel, starting at dy*Wp + dx, and the whole output is

    out_wide[O, Ho*Wp] = sum over taps of W[:, :, dy, dx] [O, C] @ xp[:, dy*Wp+dx :][C, Ho*Wp]

kh*kw products reading the image in place (a matrix whose rows are Hp*Wp+kw-1
apart), accumulated by the BLAS itself (beta = 1): nothing is copied but the
padded image and the output's valid columns. The filter gradient is the same
walk with the output gradient laid out wide (zeros in the thrown-away columns)
and summed over images; the input gradient is a convolution of the padded
output gradient with the flipped, transposed filter (``conv.convolution_input_adjoint``),
which comes here in turn.

On ResNet's 64-channel 3x3 layers (batch 32, 32x32) the im2col kernels spent
a third of their time building or scattering columns. ``applies`` says where
the products are large enough for this to win (measured in ``conv``).
"""
from __future__ import annotations

import numpy as np

from .. import blas
from .scratch import scratch

__all__ = ["applies", "applies_to_filter_grad", "conv", "filter_grad"]

MIN_CHANNELS = 16
"""Fewest input and output channels: each product's inner size is a channel count (the filter gradient's is
the image's size), and BLAS is slow on thin products. On LeNet's 6 -> 16 5x5 layer the shifted products took
12.5 ms against im2col's 4.8 (float32, batch 64)."""


def applies(x_shape, w_shape, strides, dilations, pads, groups: int, dtype) -> bool:
    """True for a 2-D, stride-1, undilated, ungrouped convolution of at least ``MIN_CHANNELS`` channels in and out,
    padded by less than the kernel's size on each side, of a dtype the chosen BLAS computes, whose products (one
    per image and tap) are above ``MIN_PRODUCT`` multiply-adds: below it the calls cost more than the
    columns they save (16 -> 16 channels on 14x14 images: 4.5 ms against im2col's 1.5)."""
    if len(x_shape) != 4 or groups != 1 or blas.PROVIDER is None or np.dtype(dtype) not in blas.GEMM_DTYPES:
        return False
    (c, h, w), (o, _, kh, kw) = x_shape[1:], w_shape
    top, bottom, left, right = pads
    rows, wide = h + top + bottom - kh + 1, w + left + right
    return (all(s == 1 for s in strides) and all(d == 1 for d in dilations) and min(c, o) >= MIN_CHANNELS
            and max(top, bottom) < kh and max(left, right) < kw and min(h, w, rows, wide - kw + 1) > 0
            and o * rows * wide * c > MIN_PRODUCT and (kw - 1) <= MAX_WASTE * wide)


def applies_to_filter_grad(x_shape, w_shape, strides, dilations, pads, groups: int, dtype) -> bool:
    """``applies``, for images of at most ``FILTER_GRAD_MAX_PIXELS`` output pixels: the filter gradient's
    products are NT (OpenBLAS's slower kind) with the image's size inside, and lost to im2col's on larger images
    (64 channels on 56x56, batch 8: 15.7 -> 24.0 ms; 64 on 32x32: a tie) while winning on small ones (256
    channels on 14x14, batch 16: 34.3 -> 27.0 ms; 512 on 7x7: 49.9 -> 31.7)."""
    if not applies(x_shape, w_shape, strides, dilations, pads, groups, dtype):
        return False
    top, bottom, left, right = pads
    pixels = (x_shape[2] + top + bottom - w_shape[2] + 1) * (x_shape[3] + left + right - w_shape[3] + 1)
    return pixels <= FILTER_GRAD_MAX_PIXELS


MIN_PRODUCT = blas.SMALL_PRODUCT
"""Fewest multiply-adds of one product (one image, one tap) for the shifted products (``applies``)."""

MAX_WASTE = 0.15
"""Largest share of each product's columns thrown away (the kw-1 past each output row of the padded width):
512 channels on 7x7 (2 of 9 columns) took 35.0 ms against im2col's 28.6; 14x14 (2 of 16) 25.4 against 32.4."""

FILTER_GRAD_MAX_PIXELS = 196
"""Most output pixels of an image whose filter gradient runs as shifted products (``applies_to_filter_grad``)."""


def _padded_flat(image: np.ndarray, pads, kw: int, purpose: str) -> tuple[np.ndarray, int, int]:
    """``image`` [C, H, W] padded by ``pads`` (top, bottom, left, right) in a scratch [C, Hp*Wp + kw - 1] (zeros
    around and after), with Hp and Wp."""
    c, h, w = image.shape
    top, bottom, left, right = pads
    hp, wp = h + top + bottom, w + left + right
    flat = scratch(purpose, (c, hp * wp + kw - 1), image.dtype)
    flat[...] = 0
    flat[:, :hp * wp].reshape(c, hp, wp)[:, top:top + h, left:left + w] = image
    return flat, hp, wp


def _taps_into(taps: np.ndarray, flat: np.ndarray, wp: int, rows: int, wide: np.ndarray) -> None:
    """``wide`` [O, rows*wp] = sum over taps of ``taps[dy, dx]`` [O, C] @ the run of ``flat`` at dy*wp + dx."""
    kh, kw, o, c = taps.shape
    length, item = rows * wp, flat.itemsize
    for at in range(kh * kw):
        dy, dx = divmod(at, kw)
        blas.gemm_at(flat.dtype, False, o, length, c, taps[dy, dx].ctypes.data, c,
                     flat.ctypes.data + item * (dy * wp + dx), flat.shape[1], 0.0 if at == 0 else 1.0,
                     wide.ctypes.data, length)


def conv(x: np.ndarray, w: np.ndarray, pads, result: np.ndarray) -> np.ndarray:
    """The convolution of ``x`` [N, C, H, W] by ``w`` [O, C, kh, kw] (stride 1, ``applies``) into ``result``."""
    n, o = x.shape[0], w.shape[0]
    kh, kw = w.shape[2:]
    ho, wo = result.shape[2:]
    taps = np.ascontiguousarray(w.transpose(2, 3, 0, 1))  # [kh, kw, O, C]: each tap's filter one matrix
    for i in range(n):
        flat, _, wp = _padded_flat(x[i], pads, kw, "shifted image")
        wide = scratch("shifted output", (o, ho * wp), x.dtype)
        _taps_into(taps, flat, wp, ho, wide)
        result[i] = wide.reshape(o, ho, wp)[:, :, :wo]
    return result


def filter_grad(x: np.ndarray, gout: np.ndarray, pads, result: np.ndarray) -> np.ndarray:
    """The convolution's adjoint in its filter [O, C, kh, kw] (``result``): per tap, the wide output gradient times the
    tap's run of the padded image, transposed, summed over images."""
    n, c = x.shape[:2]
    o, _, kh, kw = result.shape
    ho, wo = gout.shape[2:]
    taps = scratch("shifted filter taps", (kh, kw, o, c), x.dtype)
    if n == 0:
        result[...] = 0
        return result
    for i in range(n):
        flat, _, wp = _padded_flat(x[i], pads, kw, "shifted image")
        length = ho * wp
        wide = scratch("shifted output", (o, ho, wp), x.dtype)
        wide[:, :, wo:] = 0
        wide[:, :, :wo] = gout[i]
        for at in range(kh * kw):
            dy, dx = divmod(at, kw)
            blas.gemm_at(x.dtype, True, o, c, length, wide.ctypes.data, length,
                         flat.ctypes.data + flat.itemsize * (dy * wp + dx), flat.shape[1], 0.0 if i == 0 else 1.0,
                         taps[dy, dx].ctypes.data, c)
    result[...] = taps.transpose(2, 3, 0, 1)
    return result
