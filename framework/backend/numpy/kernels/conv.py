"""Convolution kernels as matrix products: column matrices (``im2col``) times the filter, through gradgen's BLAS.

Each op works on a few images at a time (``COLUMN_BYTES``), so that
their column matrix stays a few megabytes in a reused scratch array and in
cache, and for each image and group makes one product (``gemm_batch``):

- conv2d:          out[n, g]   = W[g] @ cols[n, g]                  [Og, Cg*kh*kw] @ [Cg*kh*kw, OH*OW]
- filter gradient: dW[g]      += dout[n, g] @ cols[n, g]^T          summed over the images
- input gradient:  dcols[n, g] = W[g]^T @ dout[n, g], then col2im   (``im2col.add_columns``; at stride 1
                   on rows widened to the padded input, ``add_wide_columns``)
- conv2d_transpose is the input gradient at the size its attrs give.

The outputs are NCHW as they come out of the products: nothing is transposed.
Pooling lives in ``pooling``; this module is the family's kernel table.
"""
from __future__ import annotations

import numpy as np

from gradgen.program.ops.conv import transposed_size

from .gemm_batch import gemm_batch
from .im2col import Sweep, add_columns, add_wide_columns, columns, pad_into
from .pooling import pool2d, pool2d_grad, pool2d_select
from .scratch import scratch
from .signature import result_array

COLUMN_BYTES = 4 << 20
"""The column matrix a conv kernel builds at once holds whole images and at most this many bytes (unless one
image alone needs more). On LeNet and ResNet shapes 1 MiB, 16 MiB and the whole batch timed alike, within
noise (a LeNet batch fits in 4 MiB; a ResNet image takes 2.4 MiB): the bound is there for memory."""


def _chunks(n: int, bytes_per_image: int):
    """(first, end) image ranges whose columns take at most ``COLUMN_BYTES`` (or one image)."""
    step = max(1, min(n, COLUMN_BYTES // max(bytes_per_image, 1)))
    return ((lo, min(lo + step, n)) for lo in range(0, n, step))


def _sweeper(op):
    """``sweep(w_shape) -> Sweep``: the op's attrs read once, in the factory; the filter's size at each call."""
    (ph, pw) = op.attr("paddings")
    strides, dilations = tuple(op.attr("strides")), tuple(op.attr("dilations"))
    return lambda w_shape: Sweep(w_shape[2], w_shape[3], strides, dilations, (ph, ph, pw, pw))


def _image_columns(x: np.ndarray, sweep: Sweep, oh: int, ow: int) -> np.ndarray:
    """Scratch columns [N, C, kh, kw, OH, OW] of the images ``x``."""
    n, c, h, w = x.shape
    if sweep.padded():
        x = pad_into(x, sweep.pads, 0, scratch("conv padded", (n, c) + sweep.padded_hw(h, w), x.dtype))
    return columns(x, sweep, oh, ow, scratch("conv columns", (n, c, sweep.kh, sweep.kw, oh, ow), x.dtype))


def conv2d(op):
    groups, sweeper = op.attr("groups"), _sweeper(op)

    def run(x, w, *, out=None):
        sweep = sweeper(w.shape)
        (n, c, h, wd), o = x.shape, w.shape[0]
        oh, ow = sweep.out_hw(h, wd)
        result = result_array(out, (n, o, oh, ow), x.dtype)
        filters = w.reshape(groups, o // groups, -1)
        for lo, hi in _chunks(n, c * sweep.kh * sweep.kw * oh * ow * x.itemsize):
            cols = _image_columns(x[lo:hi], sweep, oh, ow).reshape(hi - lo, groups, -1, oh * ow)
            gemm_batch(filters, cols, result[lo:hi].reshape(hi - lo, groups, o // groups, oh * ow))
        return result

    return run


def conv2d_filter_grad(op):
    groups, sweeper = op.attr("groups"), _sweeper(op)

    def run(x, gout, w, *, out=None):
        sweep = sweeper(w.shape)
        (n, c), (o, oh, ow) = x.shape[:2], gout.shape[1:]
        result = result_array(out, w.shape, w.dtype)
        per_group = result.reshape(groups, o // groups, -1)
        per_group[...] = 0
        for lo, hi in _chunks(n, c * sweep.kh * sweep.kw * oh * ow * x.itemsize):
            cols = _image_columns(x[lo:hi], sweep, oh, ow).reshape(hi - lo, groups, -1, oh * ow)
            g = gout[lo:hi].reshape(hi - lo, groups, o // groups, oh * ow)
            gemm_batch(g, cols, per_group, trans_b=True, accumulate=True)
        return result

    return run


def _input_grad(w, gout, shape, sweep: Sweep, groups: int, dtype, out) -> np.ndarray:
    """conv2d's adjoint in its input: ``gout`` [N, O, OH, OW] spread back over an NCHW array of ``shape``.

    With stride 1, ``gout``'s rows are first widened to the padded input's width (``im2col.add_wide_columns``):
    a few percent more product, a much cheaper scatter."""
    o, cg, kh, kw = w.shape
    n, c, h, wd = shape
    oh, ow = gout.shape[2:]
    ph, pw = sweep.padded_hw(h, wd)
    wide = sweep.strides == (1, 1)
    row = pw if wide else ow
    result = result_array(out, shape, dtype)
    filters_t = w.reshape(groups, o // groups, cg * kh * kw).swapaxes(1, 2)
    for lo, hi in _chunks(n, c * kh * kw * oh * row * np.dtype(dtype).itemsize):
        g = gout[lo:hi]
        if wide:
            g = scratch("conv wide rows", (hi - lo, o, oh, pw), dtype)
            g[..., ow:] = 0
            g[..., :ow] = gout[lo:hi]
        gcols = scratch("conv columns", (hi - lo, c, kh, kw, oh, row), dtype)
        gemm_batch(filters_t, g.reshape(hi - lo, groups, o // groups, oh * row),
                   gcols.reshape(hi - lo, groups, cg * kh * kw, oh * row))
        gxp = result[lo:hi] if not sweep.padded() else scratch("conv padded", (hi - lo, c, ph, pw), dtype)
        gxp[...] = 0
        (add_wide_columns if wide else add_columns)(gcols, sweep, gxp)
        if sweep.padded():
            pt, _, pl, _ = sweep.pads
            result[lo:hi] = gxp[:, :, pt:pt + h, pl:pl + wd]
    return result


def conv2d_input_grad(op):
    groups, sweeper = op.attr("groups"), _sweeper(op)

    def run(w, gout, x, *, out=None):
        return _input_grad(w, gout, x.shape, sweeper(w.shape), groups, x.dtype, out)

    return run


def conv2d_transpose(op):
    """conv2d_input_grad of the filter read as a conv2d filter [O = C_in, C_out/groups, kh, kw], at the size the
    attrs give."""
    groups, extra, sweeper = op.attr("groups"), op.attr("output_padding"), _sweeper(op)
    strides, paddings, dilations = op.attr("strides"), op.attr("paddings"), op.attr("dilations")

    def run(x, w, *, out=None):
        n, _, h, wd = x.shape
        size = [transposed_size(d, k, s, p, dl, e) for d, k, s, p, dl, e in
                zip((h, wd), w.shape[2:], strides, paddings, dilations, extra)]
        return _input_grad(w, x, (n, w.shape[1] * groups, *size), sweeper(w.shape), groups, x.dtype, out)

    return run


KERNELS = {"conv2d": conv2d, "conv2d_input_grad": conv2d_input_grad, "conv2d_filter_grad": conv2d_filter_grad,
           "conv2d_transpose": conv2d_transpose,
           "pool2d": pool2d, "pool2d_grad": pool2d_grad, "pool2d_select": pool2d_select}
