"""Pooling kernels as whole-array operations over the window's taps (``im2col.tap``): one per kernel position, no
loop over pixels, for 1 to 3 spatial dims, windows dilated or not.

Max pooling's gradient goes to the first maximum of each window in row-major
order (ties!), and a NaN counts as the maximum, its first one taking the
gradient, as ``np.argmax`` would pick. The gradient and ``pool2d_select``
multiply by 0/1 masks rather than select, so a NaN or infinite incoming value
spreads over its whole window (0 * inf is NaN), as it always has.
"""
from __future__ import annotations

import math

import numpy as np

from gradgen.program.ops.conv import pool_out_size, pool_paddings

from .im2col import Sweep, pad_into, tap

__all__ = ["pool2d", "pool2d_grad", "pool2d_select"]


class _Pooling:
    """One pool2d op's attrs, and the sweep, divisor and maxima masks they imply for an input shape."""

    def __init__(self, op):
        self.kind, self.ksize, self.strides = op.attr("pooling_type"), op.attr("ksize"), op.attr("strides")
        self.dilations = op.attr("dilations")
        self.pads, self.exclusive = pool_paddings(op.attr("paddings"), len(self.ksize)), op.attr("exclusive")
        self.ceil_mode = op.attr("ceil_mode")

    def sweep(self, size) -> Sweep:
        """The sweep over the input padded on the far sides by what the last (ceil mode) window reaches too."""
        pads = []
        for d, (n, k, s, dl) in enumerate(zip(size, self.ksize, self.strides, self.dilations)):
            span, before, after = (k - 1) * dl + 1, self.pads[2 * d], self.pads[2 * d + 1]
            out = pool_out_size(n, span, s, before, after, self.ceil_mode)
            pads += [before, max(after, (out - 1) * s + span - n - before)]
        return Sweep(tuple(self.ksize), tuple(self.strides), tuple(self.dilations), tuple(pads))

    def taps(self, x: np.ndarray, value: float):
        """The sweep, output size, and the taps of ``x`` padded with ``value``, row-major."""
        sweep = self.sweep(x.shape[2:])
        out = sweep.out_size(x.shape[2:])
        if sweep.padded():
            x = pad_into(x, sweep.pads, value, np.empty(x.shape[:2] + sweep.padded_size(x.shape[2:]), x.dtype))
        return sweep, out, [tap(x, sweep, at, out) for at in np.ndindex(*sweep.kernel)]

    def divisor(self, shape, out, dtype):
        """Per window: its in-bounds elements (exclusive) or its whole area."""
        if not self.exclusive:
            return dtype.type(math.prod(self.ksize))
        counts = np.ones((), dtype)
        for d, (n, k, s, dl, o) in enumerate(zip(shape[2:], self.ksize, self.strides, self.dilations, out)):
            reach = (np.arange(o) * s - self.pads[2 * d])[:, None] + np.arange(k) * dl
            counts = np.multiply.outer(counts, ((reach >= 0) & (reach < n)).sum(1))
        return counts.astype(dtype)

    def first_maxima(self, x: np.ndarray):
        """The sweep, output size, and per tap a boolean mask [N, C, *out]: True where this tap holds its
        window's first maximum (a NaN being the maximum where there is one)."""
        sweep, out, taps = self.taps(x, -np.inf)
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
        return sweep, out, masks


def _reduce(ufunc, taps, out):
    """``out`` holding ``ufunc`` folded over the taps."""
    np.copyto(out, taps[0])
    for t in taps[1:]:
        ufunc(out, t, out=out)
    return out


def pool2d(op):
    pool = _Pooling(op)

    def run(x):
        _, size, taps = pool.taps(x, -np.inf if pool.kind == "max" else 0.0)
        result = np.empty(x.shape[:2] + size, x.dtype)
        if pool.kind == "max":
            return _reduce(np.maximum, taps, result)
        result = _reduce(np.add, taps, result)
        result /= pool.divisor(x.shape, size, x.dtype)
        return result

    return run


def _scatter(sweep: Sweep, shape, dtype, shares):
    """An N-C-spatial array of ``shape``: each tap's [N, C, *out] share added back where the tap reads."""
    result = np.empty(shape, dtype)
    gxp = np.empty(shape[:2] + sweep.padded_size(shape[2:]), dtype) if sweep.padded() else result
    gxp[...] = 0
    for at, share in zip(np.ndindex(*sweep.kernel), shares):
        tap(gxp, sweep, at, share.shape[2:])[...] += share
    if gxp is not result:
        result[...] = gxp[sweep.inner(shape[2:])]
    return result


def pool2d_grad(op):
    pool = _Pooling(op)

    def run(x, gout):
        if pool.kind == "max":
            sweep, _, masks = pool.first_maxima(x)
            shares = (m * gout for m in masks)
        else:
            sweep = pool.sweep(x.shape[2:])
            share = gout / pool.divisor(x.shape, gout.shape[2:], x.dtype)
            shares = (share for _ in range(math.prod(sweep.kernel)))
        return _scatter(sweep, x.shape, x.dtype, shares)

    return run


def pool2d_select(op):
    pool = _Pooling(op)

    def run(x, d):
        _, _, masks = pool.first_maxima(x)
        _, _, taps = pool.taps(d, 0.0)
        result = np.multiply(masks[0], taps[0], dtype=x.dtype)
        for m, t in zip(masks[1:], taps[1:]):
            result += m * t
        return result

    return run
