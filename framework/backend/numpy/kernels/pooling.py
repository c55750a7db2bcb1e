"""Pooling's windows as whole-array operations over the taps (``im2col.tap``): one per kernel position, no loop
over pixels, for 1 to 3 spatial dims, windows dilated or not. The pooling ops state their math over these
(``program/ops/conv.py``: the maximum, the first maxima taking a max window's gradient, the average); the attrs,
sweep and divisor are read as every engine reads them (``shared/conv.Pooling``).
"""
from __future__ import annotations


import numpy as np

from ...shared.conv import Pooling, Sweep
from .im2col import pad_into, tap

__all__ = ["PRIMITIVES", "add_pool_taps", "pool_divisor", "pool_taps"]


def _taps(pool: Pooling, x: np.ndarray, value: float):
    """The sweep, output size, and the taps of ``x`` padded with ``value``, row-major."""
    sweep = pool.sweep(x.shape[2:])
    out = sweep.out_size(x.shape[2:])
    if sweep.padded():
        x = pad_into(x, sweep.pads, value, np.empty(x.shape[:2] + sweep.padded_size(x.shape[2:]), x.dtype))
    return sweep, out, [tap(x, sweep, at, out) for at in np.ndindex(*sweep.kernel)]


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


def pool_taps(x: np.ndarray, value: float, **window) -> list[np.ndarray]:
    """The window's taps of ``x`` padded with ``value``: [N, C, *out] views, row-major."""
    return _taps(Pooling(**window), x, value)[2]


def add_pool_taps(shares: list, shape, **window) -> np.ndarray:
    """``pool_taps``' adjoint: an N-C-spatial array of ``shape`` holding each share added where its tap reads."""
    return _scatter(Pooling(**window).sweep(shape[2:]), shape, shares[0].dtype, shares)


def pool_divisor(x: np.ndarray, out, *, exclusive: bool, **window):
    """Per window its in-bounds elements (``exclusive``) or its area, in ``x``'s dtype."""
    return Pooling(exclusive=exclusive, **window).divisor(x.shape, out, x.dtype)


PRIMITIVES = {"pool_taps": pool_taps, "add_pool_taps": add_pool_taps, "pool_divisor": pool_divisor}
"""Pooling's windows as the ops' computes call them (``program/ops/conv.py``): ``xp.<name>`` of this engine."""
