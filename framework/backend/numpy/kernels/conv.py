"""The convolution as matrix products: column matrices (``im2col``) times the filter, through gradgen's BLAS.
The ops' computes (``program/ops/conv.py``) call it as ``xp.convolution`` and its two adjoints (``PRIMITIVES``).

Each call works on a few images at a time (``COLUMN_BYTES``), so that
their column matrix stays a few megabytes in a reused scratch array and in
cache, and for each image and group makes one product (``gemm_batch``):

- convolution:     out[n, g]   = W[g] @ cols[n, g]                  [Og, Cg*kh*kw] @ [Cg*kh*kw, OH*OW]
- filter adjoint:  dW[g]      += dout[n, g] @ cols[n, g]^T          summed over the images
- input adjoint:   dcols[n, g] = W[g]^T @ dout[n, g], then col2im   (``im2col.add_columns``; at stride 1
                   on rows widened to the padded input, ``add_wide_columns``)

A stride-1 2-D convolution with enough channels skips the columns: ``shifted`` (sums of products reading the
padded image in place), where ``shifted.applies`` says they were measured faster.

The same functions serve 1, 2 and 3 spatial dims (kh*kw above is the product of the kernel's sizes, OH*OW of
the output's). The outputs are N-C-spatial as they come out of the products: nothing is transposed.
Pooling's windows live in ``pooling``; this module gathers the family's primitives.
"""
from __future__ import annotations

import math

import numpy as np

from ...shared.conv import Sweep
from .gemm_batch import gemm_batch
from .im2col import add_columns, add_wide_columns, columns, pad_into
from . import shifted
from . import pooling
from .scratch import scratch

COLUMN_BYTES = 4 << 20
"""The column matrix a conv kernel builds at once holds whole images and at most this many bytes (unless one
image alone needs more). On LeNet and ResNet shapes 1 MiB, 16 MiB and the whole batch timed alike, within
noise (a LeNet batch fits in 4 MiB; a ResNet image takes 2.4 MiB): the bound is there for memory."""


def _chunks(n: int, bytes_per_image: int):
    """(first, end) image ranges whose columns take at most ``COLUMN_BYTES`` (or one image)."""
    step = max(1, min(n, COLUMN_BYTES // max(bytes_per_image, 1)))
    return ((lo, min(lo + step, n)) for lo in range(0, n, step))


def _sweep(w_shape, strides, paddings, dilations) -> Sweep:
    """The window sweep of a filter of ``w_shape`` with these attrs (each padding on both sides of its dim)."""
    return Sweep(tuple(w_shape[2:]), tuple(strides), tuple(dilations), tuple(p for p in paddings for _ in (0, 1)))


def _image_columns(x: np.ndarray, sweep: Sweep, out) -> np.ndarray:
    """Scratch columns [N, C, *kernel, *out] of the images ``x``."""
    n, c = x.shape[:2]
    if sweep.padded():
        x = pad_into(x, sweep.pads, 0, scratch("conv padded", (n, c) + sweep.padded_size(x.shape[2:]), x.dtype))
    return columns(x, sweep, out, scratch("conv columns", (n, c) + sweep.kernel + tuple(out), x.dtype))


def _convolved(x: np.ndarray, w: np.ndarray, sweep: Sweep, groups: int) -> np.ndarray:
    """The convolution of ``x`` by ``w`` as ``sweep`` places it."""
    (n, c), o = x.shape[:2], w.shape[0]
    size = sweep.out_size(x.shape[2:])
    pixels = math.prod(size)
    result = np.empty((n, o) + size, x.dtype)
    if shifted.applies(x.shape, w.shape, sweep.strides, sweep.dilations, sweep.pads, groups, x.dtype):
        return shifted.conv(x, w, sweep.pads, result)
    filters = w.reshape(groups, o // groups, -1)
    for lo, hi in _chunks(n, c * math.prod(sweep.kernel) * pixels * x.itemsize):
        cols = _image_columns(x[lo:hi], sweep, size).reshape(hi - lo, groups, -1, pixels)
        gemm_batch(filters, cols, result[lo:hi].reshape(hi - lo, groups, o // groups, pixels))
    return result


def convolution(x: np.ndarray, w: np.ndarray, *, strides, paddings, dilations, groups: int) -> np.ndarray:
    """The cross-correlation of N-C-spatial ``x`` with an [O, C/groups, *kernel] filter ``w``."""
    return _convolved(x, w, _sweep(w.shape, strides, paddings, dilations), groups)


def convolution_filter_adjoint(x: np.ndarray, gout: np.ndarray, shape, *, strides, paddings, dilations,
                               groups: int) -> np.ndarray:
    """The convolution's adjoint in its filter (of ``shape``): ``gout`` [N, O, *out] against ``x``'s windows."""
    sweep = _sweep(shape, strides, paddings, dilations)
    (n, c), o, size = x.shape[:2], gout.shape[1], gout.shape[2:]
    pixels = math.prod(size)
    result = np.empty(shape, x.dtype)
    if shifted.applies_to_filter_grad(x.shape, shape, sweep.strides, sweep.dilations, sweep.pads, groups, x.dtype):
        return shifted.filter_grad(x, gout, sweep.pads, result)
    per_group = result.reshape(groups, o // groups, -1)
    per_group[...] = 0
    for lo, hi in _chunks(n, c * math.prod(sweep.kernel) * pixels * x.itemsize):
        cols = _image_columns(x[lo:hi], sweep, size).reshape(hi - lo, groups, -1, pixels)
        g = gout[lo:hi].reshape(hi - lo, groups, o // groups, pixels)
        gemm_batch(g, cols, per_group, trans_b=True, accumulate=True)
    return result


def _input_grad(w, gout, shape, sweep: Sweep, groups: int, dtype) -> np.ndarray:
    """The convolution's adjoint in its input: ``gout`` [N, O, *out] spread back over an N-C-spatial array of
    ``shape``, by im2col's scatter.

    With stride 1, ``gout`` is first widened to the padded input's size in every spatial dim but the first
    (``im2col.add_wide_columns``): a few percent more product, a much cheaper scatter. Not with a non-finite filter:
    its products with the widening's zeros would be NaN (0 * inf) where the adjoint has no product at all."""
    o, cg = w.shape[:2]
    (n, c), size, got = shape[:2], shape[2:], gout.shape[2:]
    padded = sweep.padded_size(size)
    wide = all(s == 1 for s in sweep.strides) and len(size) > 1 and bool(np.isfinite(w).all())
    rows = (got[0],) + padded[1:] if wide else got
    taps, pixels = math.prod(sweep.kernel), math.prod(rows)
    result = np.empty(shape, dtype)
    filters_t = w.reshape(groups, o // groups, cg * taps).swapaxes(1, 2)
    for lo, hi in _chunks(n, c * taps * pixels * np.dtype(dtype).itemsize):
        g = gout[lo:hi]
        if wide:
            g = scratch("conv wide rows", (hi - lo, o) + rows, dtype)
            for d in range(1, len(got)):  # zeros past the output, nowhere else written twice
                g[(slice(None),) * (2 + d) + (slice(got[d], None),)] = 0
            g[(slice(None), slice(None)) + tuple(slice(0, k) for k in got)] = gout[lo:hi]
        gcols = scratch("conv columns", (hi - lo, c) + sweep.kernel + rows, dtype)
        gemm_batch(filters_t, g.reshape(hi - lo, groups, o // groups, pixels),
                   gcols.reshape(hi - lo, groups, cg * taps, pixels))
        gxp = result[lo:hi] if not sweep.padded() else scratch("conv padded", (hi - lo, c) + padded, dtype)
        gxp[...] = 0
        if wide:
            add_wide_columns(gcols, sweep, got, gxp)
        else:
            add_columns(gcols, sweep, gxp)
        if sweep.padded():
            result[lo:hi] = gxp[sweep.inner(size)]
    return result


def _adjoint_sweep(sweep: Sweep) -> Sweep | None:
    """The sweep whose convolution of the output gradient, by the flipped transposed filter, is the input
    gradient: stride 1 and no dilation only, each padding at most the kernel's size less one (else None)."""
    if any(s != 1 for s in sweep.strides) or any(d != 1 for d in sweep.dilations):
        return None
    pads = tuple(sweep.kernel[i // 2] - 1 - p for i, p in enumerate(sweep.pads))
    return None if min(pads) < 0 else Sweep(sweep.kernel, sweep.strides, sweep.dilations, pads)


def _adjoint_filter(w: np.ndarray, groups: int) -> np.ndarray:
    """[O, C/g, *k] -> [C, O/g, *k] per group, flipped in every spatial dim: the filter of the input gradient."""
    o, cg = w.shape[:2]
    per_group = w.reshape((groups, o // groups, cg) + w.shape[2:]).swapaxes(1, 2)
    flipped = per_group[(Ellipsis,) + (slice(None, None, -1),) * (w.ndim - 2)]
    return np.ascontiguousarray(flipped).reshape((groups * cg, o // groups) + w.shape[2:])


def convolution_input_adjoint(w: np.ndarray, gout: np.ndarray, shape, *, strides, paddings, dilations,
                              groups: int) -> np.ndarray:
    """The convolution's adjoint in its input (of ``shape``), which is also the transposed convolution.

    At stride 1 it is a convolution of the output gradient (``_adjoint_sweep``), taken where it beats im2col's
    scatter: for a grouped convolution (the scatter over many small groups is slow: a depthwise 3x3 on 96 channels
    of 16x16, batch 32, 16.2 ms as a scatter, 4.5 ms as a convolution) and where the forward convolution runs as
    ``shifted`` products (ResNet's 64-channel 3x3: 28.3 -> 18.5 ms). An ungrouped one with few channels stays the
    scatter (LeNet's: 1.1 against 2.4 ms as a convolution). A non-finite filter stays the scatter too: that
    convolution multiplies it by the zeros padding the output gradient, NaN (0 * inf) where the adjoint has no
    product (PyTorch and XLA agree; ``design_docs/numerics.md``)."""
    sweep = _sweep(w.shape, strides, paddings, dilations)
    adjoint = _adjoint_sweep(sweep)
    faster = groups > 1 or shifted.applies(tuple(shape), w.shape, sweep.strides, sweep.dilations, sweep.pads,
                                           groups, w.dtype)
    if adjoint is not None and faster and np.isfinite(w).all():
        return _convolved(gout, _adjoint_filter(w, groups), adjoint, groups)
    return _input_grad(w, gout, tuple(shape), sweep, groups, w.dtype)


PRIMITIVES = {"convolution": convolution, "convolution_input_adjoint": convolution_input_adjoint,
              "convolution_filter_adjoint": convolution_filter_adjoint, **pooling.PRIMITIVES}
"""The convolution and pooling's windows as the ops' computes call them (``program/ops/conv.py``): ``xp.<name>``
of this engine."""
