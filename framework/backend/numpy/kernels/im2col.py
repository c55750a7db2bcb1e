"""Where a kernel's taps fall on an NCHW input, and the column matrices (im2col) built from them.

A **tap** is one kernel position (i, j): the strided view of the padded
input that it meets at every output position, [N, C, OH, OW]. Pooling
reduces over the taps; a convolution copies them into **columns**,
[N, C, kh, kw, OH, OW], so that per image (and group) it is one matrix
product: W [O, C*kh*kw] @ columns [C*kh*kw, OH*OW] is the output [O, OH*OW],
already in NCHW order. The adjoint (col2im) adds each tap's slice of column
gradients back into the padded input: one whole-array add per tap (kh*kw of
them), never a loop over pixels. With stride 1 the column gradients can be
made as wide as the padded input (zeros past OW), and each tap's add is then
one contiguous run per image and channel instead of OH runs of OW.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

__all__ = ["Sweep", "add_columns", "add_wide_columns", "columns", "pad_into", "tap"]


class Sweep(NamedTuple):
    """A kh x kw kernel swept over an input: strides, dilations, and paddings (top, bottom, left, right; a far
    side may include rows or columns that only ceil-mode pooling reaches)."""

    kh: int
    kw: int
    strides: tuple[int, int]
    dilations: tuple[int, int]
    pads: tuple[int, int, int, int]

    def out_hw(self, h: int, w: int) -> tuple[int, int]:
        """How many positions the kernel takes along the padded height and width."""
        (sh, sw), (dh, dw), (pt, pb, pl, pr) = self.strides, self.dilations, self.pads
        return ((h + pt + pb - dh * (self.kh - 1) - 1) // sh + 1, (w + pl + pr - dw * (self.kw - 1) - 1) // sw + 1)

    def padded_hw(self, h: int, w: int) -> tuple[int, int]:
        pt, pb, pl, pr = self.pads
        return h + pt + pb, w + pl + pr

    def padded(self) -> bool:
        return any(self.pads)


def pad_into(x: np.ndarray, pads, value: float, out: np.ndarray) -> np.ndarray:
    """``out`` (shaped like ``x`` padded by ``pads``) holding ``x`` inside a border of ``value``."""
    pt, pb, pl, pr = pads
    h, w = x.shape[2:]
    out[:, :, :pt] = value
    out[:, :, pt + h:] = value
    out[:, :, pt:pt + h, :pl] = value
    out[:, :, pt:pt + h, pl + w:] = value
    out[:, :, pt:pt + h, pl:pl + w] = x
    return out


def tap(xp: np.ndarray, sweep: Sweep, i: int, j: int, oh: int, ow: int) -> np.ndarray:
    """The [N, C, OH, OW] view of padded ``xp`` that tap (i, j) meets."""
    (sh, sw), (dh, dw) = sweep.strides, sweep.dilations
    return xp[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]


def columns(xp: np.ndarray, sweep: Sweep, oh: int, ow: int, out: np.ndarray) -> np.ndarray:
    """``out`` [N, C, kh, kw, OH, OW] filled with the taps of padded ``xp``, in one strided copy."""
    (sh, sw), (dh, dw) = sweep.strides, sweep.dilations
    view = sliding_window_view(xp, ((sweep.kh - 1) * dh + 1, (sweep.kw - 1) * dw + 1), axis=(2, 3))
    view = view[:, :, :sh * (oh - 1) + 1:sh, :sw * (ow - 1) + 1:sw, ::dh, ::dw]
    np.copyto(out, view.transpose(0, 1, 4, 5, 2, 3))
    return out


def add_columns(gcols: np.ndarray, sweep: Sweep, gxp: np.ndarray) -> np.ndarray:
    """``gxp`` (padded NCHW) plus the column gradients ``gcols`` [N, C, kh, kw, OH, OW]: the adjoint of
    ``columns``, one slice-add per tap."""
    oh, ow = gcols.shape[4:]
    for i in range(sweep.kh):
        for j in range(sweep.kw):
            tap(gxp, sweep, i, j, oh, ow)[...] += gcols[:, :, i, j]
    return gxp


def add_wide_columns(gcols: np.ndarray, sweep: Sweep, gxp: np.ndarray) -> np.ndarray:
    """``add_columns`` for stride 1 and column gradients [N, C, kh, kw, OH, Wp] whose rows are as wide as the
    padded input, zero past OW: a tap's rows then lie end to end in ``gxp``'s (contiguous) planes, the zeros
    falling between them, and each tap is one add of contiguous runs. (A non-finite filter puts a NaN in
    those zeros, and so beside the tap's reach too: the gradient is NaN either way.)"""
    n, c, kh, kw, oh, wp = gcols.shape
    dh, dw = sweep.dilations
    run = (oh - 1) * wp + wp - (kw - 1) * dw  # the last row ends at OW
    planes = gxp.view()
    planes.shape = (n, c, gxp.shape[2] * wp)  # raises rather than copy: the adds must land in gxp
    rows = gcols.reshape(n, c, kh, kw, oh * wp)
    for i in range(kh):
        for j in range(kw):
            at = i * dh * wp + j * dw
            planes[:, :, at:at + run] += rows[:, :, i, j, :run]
    return gxp
