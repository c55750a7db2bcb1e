"""The conv and pool kernels as they were before they became matrix products: windows as strided views,
products as einsum. Kept as an independent reference for the lowered kernels (tests/nn/test_conv_lowering.py).
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from gradgen.program.ops.conv import pool_out_size, pool_paddings, transposed_size


def _windows(xp, kh: int, kw: int, strides, dilations):
    """[N, C, OH, OW, kh, kw] windows of padded NCHW ``xp`` (views, no copies)."""
    (sh, sw), (dh, dw) = strides, dilations
    view = sliding_window_view(xp, ((kh - 1) * dh + 1, (kw - 1) * dw + 1), axis=(2, 3))
    return view[:, :, ::sh, ::sw, ::dh, ::dw]


def _pad(x, paddings, value=0.0, extra=(0, 0)):
    """NCHW ``x`` padded by ``paddings`` ([h, w] or four sides), plus ``extra`` rows and columns at the far end."""
    pt, pb, pl, pr = pool_paddings(paddings)
    pb, pr = pb + extra[0], pr + extra[1]
    if not (pt or pb or pl or pr):
        return x
    return np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=value)


def _scatter_windows(gwin, shape, paddings, strides, dilations, extra=(0, 0)):
    """Sum window gradients [N, C, OH, OW, kh, kw] back into an NCHW array of ``shape`` (the adjoint of _windows
    over ``_pad(x, paddings, extra=extra)``)."""
    (pt, pb, pl, pr), (sh, sw), (dh, dw) = pool_paddings(paddings), strides, dilations
    n, c, oh, ow, kh, kw = gwin.shape
    gxp = np.zeros((n, c, shape[2] + pt + pb + extra[0], shape[3] + pl + pr + extra[1]), dtype=gwin.dtype)
    for i in range(kh):
        for j in range(kw):
            gxp[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw] += gwin[..., i, j]
    return gxp[:, :, pt: pt + shape[2], pl: pl + shape[3]]


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


def _transposed(w, gout, shape, strides, paddings, dilations, groups, dtype):
    """conv2d's adjoint in its input: ``gout`` [N, O, OH, OW] spread back over an NCHW array of ``shape``."""
    o, cg, kh, kw = w.shape
    n, _, oh, ow = gout.shape
    g = gout.reshape(n, groups, o // groups, oh, ow)
    gwin = np.einsum("ngohw,gocij->ngchwij", g, w.reshape(groups, o // groups, cg, kh, kw), optimize=True)
    gwin = gwin.reshape(n, groups * cg, oh, ow, kh, kw)
    return np.ascontiguousarray(_scatter_windows(gwin, shape, paddings, strides, dilations), dtype=dtype)


def conv2d_input_grad(op):
    strides, paddings, dilations, groups = _conv_attrs(op)
    return lambda w, gout, x: _transposed(w, gout, x.shape, strides, paddings, dilations, groups, x.dtype)


def conv2d_transpose(op):
    """conv2d_input_grad of the filter read as a conv2d filter [O = C_in, C_out/groups, kh, kw], at the size the
    attrs give."""
    strides, paddings, dilations, groups = _conv_attrs(op)
    extra = op.attr("output_padding")

    def run(x, w):
        n, _, h, wd = x.shape
        size = [transposed_size(d, k, s, p, dl, e) for d, k, s, p, dl, e in
                zip((h, wd), w.shape[2:], strides, paddings, dilations, extra)]
        return _transposed(w, x, (n, w.shape[1] * groups, *size), strides, paddings, dilations, groups, x.dtype)

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


class _Pooling:
    """One pool2d op's attrs and the window arithmetic they imply: padding (with ceil mode's extra far-end rows),
    the windows, their scatter back, the average's divisor and the max's one-hot."""

    def __init__(self, op):
        self.kind, self.ksize, self.strides = op.attr("pooling_type"), op.attr("ksize"), op.attr("strides")
        self.paddings, self.exclusive = op.attr("paddings"), op.attr("exclusive")
        self.ceil_mode = op.attr("ceil_mode")

    def extra(self, shape):
        """Rows and columns past the far padding that the last (ceil mode) windows reach."""
        sides = pool_paddings(self.paddings)
        extra = []
        for size, k, s, before, after in zip(shape[2:], self.ksize, self.strides, sides[::2], sides[1::2]):
            out = pool_out_size(size, k, s, before, after, self.ceil_mode)
            extra.append(max(0, (out - 1) * s + k - (size + before + after)))
        return tuple(extra)

    def windows(self, x, value):
        return _windows(_pad(x, self.paddings, value, self.extra(x.shape)), self.ksize[0], self.ksize[1],
                        self.strides, (1, 1))

    def scatter(self, gwin, shape):
        return _scatter_windows(gwin, shape, self.paddings, self.strides, (1, 1), self.extra(shape))

    def divisor(self, shape, dtype):
        """Per window: its in-bounds elements (exclusive) or its whole area."""
        if not self.exclusive:
            return dtype.type(self.ksize[0] * self.ksize[1])
        ones = np.ones((1, 1) + tuple(shape[2:]), dtype=dtype)
        return self.windows(ones, 0.0).sum(axis=(-1, -2))

    def argmax_one_hot(self, x):
        """[N, C, OH, OW, kh, kw] 0/1 masks marking the first maximum of each window of ``x``."""
        kh, kw = self.ksize
        win = self.windows(x, -np.inf)
        flat = win.reshape(win.shape[:4] + (kh * kw,))
        hot = np.arange(kh * kw) == np.argmax(flat, axis=-1)[..., None]
        return hot.reshape(win.shape)


def pool2d(op):
    pool = _Pooling(op)

    def run(x):
        if pool.kind == "max":
            return pool.windows(x, -np.inf).max(axis=(-1, -2)).astype(x.dtype, copy=False)
        return (pool.windows(x, 0.0).sum(axis=(-1, -2)) / pool.divisor(x.shape, x.dtype)).astype(x.dtype)

    return run


def pool2d_grad(op):
    pool = _Pooling(op)

    def run(x, gout):
        if pool.kind == "max":
            gwin = pool.argmax_one_hot(x) * gout[..., None, None]
        else:
            share = gout / pool.divisor(x.shape, x.dtype)
            gwin = np.broadcast_to(share[..., None, None], share.shape + tuple(pool.ksize))
        return pool.scatter(gwin.astype(x.dtype, copy=False), x.shape)

    return run


def pool2d_select(op):
    pool = _Pooling(op)

    def run(x, d):
        return (pool.windows(d, 0.0) * pool.argmax_one_hot(x)).sum(axis=(-1, -2)).astype(x.dtype)

    return run


KERNELS = {"conv2d": conv2d, "conv2d_input_grad": conv2d_input_grad, "conv2d_filter_grad": conv2d_filter_grad,
           "conv2d_transpose": conv2d_transpose,
           "pool2d": pool2d, "pool2d_grad": pool2d_grad, "pool2d_select": pool2d_select}
