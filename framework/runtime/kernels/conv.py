"""Convolution and pooling kernels: windows as strided views, products as einsum, no loops over pixels.

The only Python loops run over the kernel's kh x kw positions, to scatter
window gradients back into the input.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def _windows(xp, kh: int, kw: int, strides, dilations):
    """[N, C, OH, OW, kh, kw] windows of padded NCHW ``xp`` (views, no copies)."""
    (sh, sw), (dh, dw) = strides, dilations
    view = sliding_window_view(xp, ((kh - 1) * dh + 1, (kw - 1) * dw + 1), axis=(2, 3))
    return view[:, :, ::sh, ::sw, ::dh, ::dw]


def _pad(x, paddings, value=0.0):
    ph, pw = paddings
    if not ph and not pw:
        return x
    return np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=value)


def _scatter_windows(gwin, shape, paddings, strides, dilations):
    """Sum window gradients [N, C, OH, OW, kh, kw] back into an NCHW array of ``shape`` (the adjoint of _windows)."""
    (ph, pw), (sh, sw), (dh, dw) = paddings, strides, dilations
    n, c, oh, ow, kh, kw = gwin.shape
    gxp = np.zeros((n, c, shape[2] + 2 * ph, shape[3] + 2 * pw), dtype=gwin.dtype)
    for i in range(kh):
        for j in range(kw):
            gxp[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw] += gwin[..., i, j]
    return gxp[:, :, ph: ph + shape[2], pw: pw + shape[3]]


def _conv_attrs(op):
    return op.attr("strides"), op.attr("paddings"), op.attr("dilations"), op.attr("groups")


def _grouped_windows(x, kh, kw, strides, paddings, dilations, groups):
    win = _windows(_pad(x, paddings), kh, kw, strides, dilations)
    n, c, oh, ow = win.shape[:4]
    return win.reshape(n, groups, c // groups, oh, ow, kh, kw)


def conv2d(op):
    strides, paddings, dilations, groups = _conv_attrs(op)

    def run(x, w):
        o, cg, kh, kw = w.shape
        win = _grouped_windows(x, kh, kw, strides, paddings, dilations, groups)
        out = np.einsum("ngchwij,gocij->ngohw", win, w.reshape(groups, o // groups, cg, kh, kw), optimize=True)
        return np.ascontiguousarray(out.reshape(x.shape[0], o, out.shape[3], out.shape[4]), dtype=x.dtype)

    return run


def conv2d_input_grad(op):
    strides, paddings, dilations, groups = _conv_attrs(op)

    def run(w, gout, x):
        o, cg, kh, kw = w.shape
        n, _, oh, ow = gout.shape
        g = gout.reshape(n, groups, o // groups, oh, ow)
        gwin = np.einsum("ngohw,gocij->ngchwij", g, w.reshape(groups, o // groups, cg, kh, kw), optimize=True)
        gwin = gwin.reshape(n, groups * cg, oh, ow, kh, kw)
        return np.ascontiguousarray(_scatter_windows(gwin, x.shape, paddings, strides, dilations), dtype=x.dtype)

    return run


def conv2d_filter_grad(op):
    strides, paddings, dilations, groups = _conv_attrs(op)

    def run(x, gout, w):
        o, cg, kh, kw = w.shape
        win = _grouped_windows(x, kh, kw, strides, paddings, dilations, groups)
        n, _, oh, ow = gout.shape
        g = gout.reshape(n, groups, o // groups, oh, ow)
        gw = np.einsum("ngchwij,ngohw->gocij", win, g, optimize=True)
        return np.ascontiguousarray(gw.reshape(w.shape), dtype=w.dtype)

    return run


def _pool_attrs(op):
    return op.attr("pooling_type"), op.attr("ksize"), op.attr("strides"), op.attr("paddings")


def _argmax_one_hot(x, ksize, strides, paddings):
    """[N, C, OH, OW, kh, kw] 0/1 masks marking the first maximum of each window of ``x``."""
    kh, kw = ksize
    win = _windows(_pad(x, paddings, -np.inf), kh, kw, strides, (1, 1))
    flat = win.reshape(win.shape[:4] + (kh * kw,))
    hot = np.arange(kh * kw) == np.argmax(flat, axis=-1)[..., None]
    return hot.reshape(win.shape)


def _counts(shape, ksize, strides, paddings, dtype):
    """How many in-bounds elements each window covers (average pooling excludes the padding)."""
    ones = np.ones((1, 1) + tuple(shape[2:]), dtype=dtype)
    win = _windows(_pad(ones, paddings), ksize[0], ksize[1], strides, (1, 1))
    return win.sum(axis=(-1, -2))


def pool2d(op):
    kind, ksize, strides, paddings = _pool_attrs(op)

    def run(x):
        if kind == "max":
            win = _windows(_pad(x, paddings, -np.inf), ksize[0], ksize[1], strides, (1, 1))
            return win.max(axis=(-1, -2)).astype(x.dtype, copy=False)
        win = _windows(_pad(x, paddings), ksize[0], ksize[1], strides, (1, 1))
        return (win.sum(axis=(-1, -2)) / _counts(x.shape, ksize, strides, paddings, x.dtype)).astype(x.dtype)

    return run


def pool2d_grad(op):
    kind, ksize, strides, paddings = _pool_attrs(op)

    def run(x, gout):
        if kind == "max":
            gwin = _argmax_one_hot(x, ksize, strides, paddings) * gout[..., None, None]
        else:
            share = gout / _counts(x.shape, ksize, strides, paddings, x.dtype)
            gwin = np.broadcast_to(share[..., None, None], share.shape + tuple(ksize))
        return _scatter_windows(gwin.astype(x.dtype, copy=False), x.shape, paddings, strides, (1, 1))

    return run


def pool2d_select(op):
    kind, ksize, strides, paddings = _pool_attrs(op)

    def run(x, d):
        win = _windows(_pad(d, paddings), ksize[0], ksize[1], strides, (1, 1))
        return (win * _argmax_one_hot(x, ksize, strides, paddings)).sum(axis=(-1, -2)).astype(x.dtype)

    return run


KERNELS = {"conv2d": conv2d, "conv2d_input_grad": conv2d_input_grad, "conv2d_filter_grad": conv2d_filter_grad,
           "pool2d": pool2d, "pool2d_grad": pool2d_grad, "pool2d_select": pool2d_select}
