"""Pooling kernels as whole-array operations over the window's taps (``im2col.tap``): one per kernel position, no
loop over pixels, for 1 to 3 spatial dims, windows dilated or not.

Max pooling's gradient goes to the first maximum of each window in row-major
order (ties!), and a NaN counts as the maximum, its first one taking the
gradient, as ``np.argmax`` would pick. The gradient and ``pool2d_select``
multiply by 0/1 masks rather than select, so a NaN or infinite incoming value
spreads over its whole window (0 * inf is NaN), as it always has. The op's attrs,
sweep and divisor are read as every engine reads them (``shared/conv.Pooling``).
"""
from __future__ import annotations

import math

import numpy as np

from ...shared.conv import Pooling, Sweep
from .im2col import pad_into, tap

__all__ = ["pool2d", "pool2d_grad", "pool2d_select"]


def _taps(pool: Pooling, x: np.ndarray, value: float):
    """The sweep, output size, and the taps of ``x`` padded with ``value``, row-major."""
    sweep = pool.sweep(x.shape[2:])
    out = sweep.out_size(x.shape[2:])
    if sweep.padded():
        x = pad_into(x, sweep.pads, value, np.empty(x.shape[:2] + sweep.padded_size(x.shape[2:]), x.dtype))
    return sweep, out, [tap(x, sweep, at, out) for at in np.ndindex(*sweep.kernel)]


def _first_maxima(pool: Pooling, x: np.ndarray):
    """The sweep, output size, and per tap a boolean mask [N, C, *out]: True where this tap holds its window's
    first maximum (a NaN being the maximum where there is one)."""
    sweep, out, taps = _taps(pool, x, -np.inf)
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
    pool = Pooling(op)

    def run(x):
        _, size, taps = _taps(pool, x, -np.inf if pool.kind == "max" else 0.0)
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
    pool = Pooling(op)

    def run(x, gout):
        if pool.kind == "max":
            sweep, _, masks = _first_maxima(pool, x)
            shares = (m * gout for m in masks)
        else:
            sweep = pool.sweep(x.shape[2:])
            share = gout / pool.divisor(x.shape, gout.shape[2:], x.dtype)
            shares = (share for _ in range(math.prod(sweep.kernel)))
        return _scatter(sweep, x.shape, x.dtype, shares)

    return run


def pool2d_select(op):
    pool = Pooling(op)

    def run(x, d):
        _, _, masks = _first_maxima(pool, x)
        _, _, taps = _taps(pool, d, 0.0)
        result = np.multiply(masks[0], taps[0], dtype=x.dtype)
        for m, t in zip(masks[1:], taps[1:]):
            result += m * t
        return result

    return run
