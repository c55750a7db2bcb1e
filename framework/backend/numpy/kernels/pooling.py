"""Pooling kernels as whole-array operations over the window's taps (``im2col.tap``): kh*kw of them, no loop
over pixels.

Max pooling's gradient goes to the first maximum of each window in row-major
order (ties!), and a NaN counts as the maximum, its first one taking the
gradient, as ``np.argmax`` would pick. The gradient and ``pool2d_select``
multiply by 0/1 masks rather than select, so a NaN or infinite incoming value
spreads over its whole window (0 * inf is NaN), as it always has.
"""
from __future__ import annotations

import numpy as np

from gradgen.program.ops.conv import pool_out_size, pool_paddings

from .im2col import Sweep, pad_into, tap
from .signature import result_array

__all__ = ["pool2d", "pool2d_grad", "pool2d_select"]


class _Pooling:
    """One pool2d op's attrs, and the sweep, divisor and maxima masks they imply for an input shape."""

    def __init__(self, op):
        self.kind, self.ksize, self.strides = op.attr("pooling_type"), op.attr("ksize"), op.attr("strides")
        self.pads, self.exclusive = pool_paddings(op.attr("paddings")), op.attr("exclusive")
        self.ceil_mode = op.attr("ceil_mode")

    def sweep(self, h: int, w: int) -> Sweep:
        """The sweep over the input padded on the far sides by what the last (ceil mode) window reaches too."""
        pt, pb, pl, pr = self.pads
        far = []
        for size, k, s, before, after in ((h, self.ksize[0], self.strides[0], pt, pb),
                                          (w, self.ksize[1], self.strides[1], pl, pr)):
            out = pool_out_size(size, k, s, before, after, self.ceil_mode)
            far.append(max(after, (out - 1) * s + k - size - before))
        return Sweep(self.ksize[0], self.ksize[1], tuple(self.strides), (1, 1), (pt, far[0], pl, far[1]))

    def taps(self, x: np.ndarray, value: float):
        """The sweep, output size, and the taps of ``x`` padded with ``value``, row-major."""
        sweep = self.sweep(*x.shape[2:])
        oh, ow = sweep.out_hw(*x.shape[2:])
        if sweep.padded():
            x = pad_into(x, sweep.pads, value, np.empty(x.shape[:2] + sweep.padded_hw(*x.shape[2:]), x.dtype))
        return sweep, (oh, ow), [tap(x, sweep, i, j, oh, ow) for i in range(sweep.kh) for j in range(sweep.kw)]

    def divisor(self, shape, oh: int, ow: int, dtype):
        """Per window: its in-bounds elements (exclusive) or its whole area."""
        kh, kw = self.ksize
        if not self.exclusive:
            return dtype.type(kh * kw)
        counts = []
        for size, k, s, before, out in ((shape[2], kh, self.strides[0], self.pads[0], oh),
                                         (shape[3], kw, self.strides[1], self.pads[2], ow)):
            start = np.arange(out) * s - before
            counts.append(np.clip(start + k, 0, size) - np.clip(start, 0, size))
        return np.multiply.outer(counts[0], counts[1]).astype(dtype)

    def first_maxima(self, x: np.ndarray):
        """The sweep, output size, and per tap a boolean mask [N, C, OH, OW]: True where this tap holds its
        window's first maximum (a NaN being the maximum where there is one)."""
        sweep, hw, taps = self.taps(x, -np.inf)
        top = _reduce(np.maximum, taps, np.empty(taps[0].shape, x.dtype))
        nan = np.isnan(top).any()
        taken = np.zeros(top.shape, bool)
        masks = []
        for t in taps:
            hit = t == top
            if nan:
                hit |= t != t
            hit &= ~taken
            taken |= hit
            masks.append(hit)
        return sweep, hw, masks


def _reduce(ufunc, taps, out):
    """``out`` holding ``ufunc`` folded over the taps."""
    np.copyto(out, taps[0])
    for t in taps[1:]:
        ufunc(out, t, out=out)
    return out


def pool2d(op):
    pool = _Pooling(op)

    def run(x, *, out=None):
        _, (oh, ow), taps = pool.taps(x, -np.inf if pool.kind == "max" else 0.0)
        result = result_array(out, x.shape[:2] + (oh, ow), x.dtype)
        if pool.kind == "max":
            return _reduce(np.maximum, taps, result)
        result = _reduce(np.add, taps, result)
        result /= pool.divisor(x.shape, oh, ow, x.dtype)
        return result

    return run


def _scatter(sweep: Sweep, shape, dtype, shares, out):
    """An NCHW array of ``shape``: each tap's [N, C, OH, OW] share added back where the tap reads."""
    result = result_array(out, shape, dtype)
    gxp = np.empty(shape[:2] + sweep.padded_hw(*shape[2:]), dtype) if sweep.padded() else result
    gxp[...] = 0
    for (i, j), share in zip(np.ndindex(sweep.kh, sweep.kw), shares):
        tap(gxp, sweep, i, j, *share.shape[2:])[...] += share
    if gxp is not result:
        pt, _, pl, _ = sweep.pads
        result[...] = gxp[:, :, pt:pt + shape[2], pl:pl + shape[3]]
    return result


def pool2d_grad(op):
    pool = _Pooling(op)

    def run(x, gout, *, out=None):
        if pool.kind == "max":
            sweep, _, masks = pool.first_maxima(x)
            shares = (m * gout for m in masks)
        else:
            sweep = pool.sweep(*x.shape[2:])
            share = gout / pool.divisor(x.shape, *gout.shape[2:], x.dtype)
            shares = (share for _ in range(sweep.kh * sweep.kw))
        return _scatter(sweep, x.shape, x.dtype, shares, out)

    return run


def pool2d_select(op):
    pool = _Pooling(op)

    def run(x, d, *, out=None):
        _, _, masks = pool.first_maxima(x)
        _, _, taps = pool.taps(d, 0.0)
        result = np.multiply(masks[0], taps[0], out=result_array(out, masks[0].shape, x.dtype))
        for m, t in zip(masks[1:], taps[1:]):
            result += m * t
        return result

    return run
