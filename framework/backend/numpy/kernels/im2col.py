"""Where a kernel's taps fall on an N-C-spatial input (1 to 3 spatial dims), and the column matrices (im2col)
built from them.

A **tap** is one kernel position (i, j, ...): the strided view of the padded
input that it meets at every output position, [N, C, *out]. Pooling reduces
over the taps; a convolution copies them into **columns**, [N, C, *kernel,
*out], so that per image (and group) it is one matrix product:
W [O, C*K] @ columns [C*K, prod(out)] is the output [O, prod(out)], already
in N-C-spatial order. The adjoint (col2im) adds each tap's slice of column
gradients back into the padded input: one whole-array add per tap, never a
loop over pixels. With stride 1 the column gradients can be made as wide as
the padded input in every spatial dim but the first (zeros past the output),
and each tap's add is then one contiguous run per image and channel.
"""
from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ...shared.conv import Sweep

__all__ = ["add_columns", "add_wide_columns", "columns", "pad_into", "tap"]


def pad_into(x: np.ndarray, pads, value: float, out: np.ndarray) -> np.ndarray:
    """``out`` (shaped like ``x`` padded by ``pads``, (before, after) per spatial dim) holding ``x`` inside a
    border of ``value``."""
    for d, n in enumerate(x.shape[2:]):
        before = (slice(None),) * (2 + d)
        out[before + (slice(0, pads[2 * d]),)] = value
        out[before + (slice(pads[2 * d] + n, None),)] = value
    out[Sweep((), (), (), tuple(pads)).inner(x.shape[2:])] = x
    return out


def tap(xp: np.ndarray, sweep: Sweep, at, out) -> np.ndarray:
    """The [N, C, *out] view of padded ``xp`` that tap ``at`` (one index per spatial dim) meets."""
    return xp[(slice(None), slice(None)) + tuple(slice(i * d, i * d + s * (o - 1) + 1, s) for i, d, s, o in
                                                 zip(at, sweep.dilations, sweep.strides, out))]


def columns(xp: np.ndarray, sweep: Sweep, out, dest: np.ndarray) -> np.ndarray:
    """``dest`` [N, C, *kernel, *out] filled with the taps of padded ``xp``, in one strided copy."""
    n = len(out)
    view = sliding_window_view(xp, tuple((k - 1) * d + 1 for k, d in zip(sweep.kernel, sweep.dilations)),
                               axis=tuple(range(2, 2 + n)))
    view = view[(slice(None), slice(None)) + tuple(slice(None, s * (o - 1) + 1, s) for s, o in zip(sweep.strides, out))
                + tuple(slice(None, None, d) for d in sweep.dilations)]
    np.copyto(dest, view.transpose(0, 1, *range(2 + n, 2 + 2 * n), *range(2, 2 + n)))
    return dest


def add_columns(gcols: np.ndarray, sweep: Sweep, gxp: np.ndarray) -> np.ndarray:
    """``gxp`` (padded) plus the column gradients ``gcols`` [N, C, *kernel, *out]: the adjoint of ``columns``,
    one slice-add per tap."""
    out = gcols.shape[2 + len(sweep.kernel):]
    for at in np.ndindex(*sweep.kernel):
        tap(gxp, sweep, at, out)[...] += gcols[(slice(None), slice(None)) + at]
    return gxp


def add_wide_columns(gcols: np.ndarray, sweep: Sweep, out, gxp: np.ndarray) -> np.ndarray:
    """``add_columns`` for stride 1 and column gradients [N, C, *kernel, out[0], *padded[1:]] as wide as the
    padded input in every spatial dim but the first, zero past ``out``: a tap's rows then lie end to end in
    ``gxp``'s (contiguous) planes, the zeros falling between them, and each tap is one add of a contiguous run.
    (A non-finite filter puts a NaN in those zeros, and so beside the tap's reach too: the gradient is NaN
    either way.)"""
    n, c = gxp.shape[:2]
    padded = gxp.shape[2:]
    flat = [math.prod(padded[d + 1:]) for d in range(len(padded))]  # the padded input's strides, in elements
    run = sum((o - 1) * f for o, f in zip(out, flat)) + 1  # the last output element ends the run
    planes = gxp.view()
    planes.shape = (n, c, math.prod(padded))  # raises rather than copy: the adds must land in gxp
    rows = gcols.reshape(n, c, math.prod(sweep.kernel), -1)
    for k, at in enumerate(np.ndindex(*sweep.kernel)):
        start = sum(i * d * f for i, d, f in zip(at, sweep.dilations, flat))
        planes[:, :, start:start + run] += rows[:, :, k, :run]
    return gxp
