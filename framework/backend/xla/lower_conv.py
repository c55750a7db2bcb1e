"""Lowerings of the convolution and pooling ops (``backend/numpy/kernels/conv.py``, ``pooling.py``).

A convolution is one ``lax.conv_general_dilated`` (NCHW, filters OIHW, full precision). Its gradients and the
transposed convolution are that conv's transposes, taken by ``jax.linear_transpose``: convolutions again,
the ones XLA is given for JAX's own gradients, with no im2col and nothing materialized.

Pooling is a ``lax.reduce_window`` over the input padded as the numpy kernel pads it (the far sides by what
a ceil-mode window reaches too). Max pooling's gradient and ``pool2d_select`` follow the numpy kernel tap by
tap: the window's maximum, then per tap (row-major) a mask of "this tap holds the first maximum" (a NaN being
the maximum where there is one), so ties go to the first, exactly. Each tap's share is the incoming value on
the mask and that value times 0 off it, as numpy's product with a 0/1 mask (an infinite or NaN value spreads
NaN over its window), and goes back to where the tap reads by an interior-padded ``lax.pad``: a strided
scatter with no scatter op, fused with the rest.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from gradgen.program.ops.conv import transposed_size

from ..numpy.kernels.im2col import Sweep
from ..numpy.kernels.pooling import _Pooling as Pooling  # the attrs, sweep and divisor as numpy reads them

__all__ = ["LOWERINGS"]

_HIGHEST = lax.Precision.HIGHEST
_NCHW = ("NCHW", "OIHW", "NCHW")


def _conv_of(op):
    """``conv(x, w)``: conv2d with the op's strides, paddings, dilations and groups."""
    strides, dilations, groups = tuple(op.attr("strides")), tuple(op.attr("dilations")), op.attr("groups")
    ph, pw = op.attr("paddings")

    def conv(x, w):
        return lax.conv_general_dilated(x, w, strides, ((ph, ph), (pw, pw)), rhs_dilation=dilations,
                                        dimension_numbers=_NCHW, feature_group_count=groups, precision=_HIGHEST)

    return conv


def _transposed_in(fn, like_shape: tuple, dtype, cotangent):
    """The transpose of linear ``fn`` (taking an array of ``like_shape``) applied to ``cotangent``."""
    (result,) = jax.linear_transpose(fn, jax.ShapeDtypeStruct(like_shape, dtype))(cotangent)
    return result


def _conv2d(op, ctx):
    return _conv_of(op)


def _conv2d_input_grad(op, ctx):
    """conv2d's adjoint in its input; rows and columns no window reached get zero."""
    conv = _conv_of(op)
    return lambda w, gout, x: _transposed_in(lambda v: conv(v, w), x.shape, x.dtype, gout)


def _conv2d_filter_grad(op, ctx):
    conv = _conv_of(op)
    return lambda x, gout, w: _transposed_in(lambda v: conv(x, v), w.shape, w.dtype, gout)


def _conv2d_transpose(op, ctx):
    """conv2d_input_grad of the filter read as a conv2d filter [O = C_in, C_out/groups, kh, kw], at the size the
    attrs give."""
    conv, groups, extra = _conv_of(op), op.attr("groups"), op.attr("output_padding")
    strides, paddings, dilations = op.attr("strides"), op.attr("paddings"), op.attr("dilations")

    def run(x, w):
        n, _, h, wd = x.shape
        size = [transposed_size(d, k, s, p, dl, e) for d, k, s, p, dl, e in
                zip((h, wd), w.shape[2:], strides, paddings, dilations, extra)]
        return _transposed_in(lambda v: conv(v, w), (n, w.shape[1] * groups, *size), x.dtype, x)

    return run


# -- pooling ---------------------------------------------------------------------------------------------------

def _window(sweep: Sweep):
    """reduce_window's dimensions, strides and paddings for ``sweep`` over NCHW."""
    pt, pb, pl, pr = sweep.pads
    return (1, 1, sweep.kh, sweep.kw), (1, 1) + tuple(sweep.strides), ((0, 0), (0, 0), (pt, pb), (pl, pr))


def _padded(x, sweep: Sweep, value: float):
    pt, pb, pl, pr = sweep.pads
    return lax.pad(x, jnp.asarray(value, x.dtype), ((0, 0, 0), (0, 0, 0), (pt, pb, 0), (pl, pr, 0)))


def _taps(xp, sweep: Sweep, oh: int, ow: int) -> list:
    """The [N, C, OH, OW] strided slices of padded ``xp`` that the window's taps meet, row-major."""
    (sh, sw), n, c = sweep.strides, xp.shape[0], xp.shape[1]
    return [lax.slice(xp, (0, 0, i, j), (n, c, i + sh * (oh - 1) + 1, j + sw * (ow - 1) + 1), (1, 1, sh, sw))
            for i in range(sweep.kh) for j in range(sweep.kw)]


def _spread(shares: list, sweep: Sweep, shape: tuple):
    """An NCHW array of ``shape``: each tap's [N, C, OH, OW] share added back where the tap reads (the adjoint
    of ``_taps`` and the padding): one interior-padded ``lax.pad`` per tap, the padding cut off by negative
    edges."""
    (sh, sw), (pt, _, pl, _) = sweep.strides, sweep.pads
    h, w = shape[2:]
    total = None
    for (i, j), share in zip(np.ndindex(sweep.kh, sweep.kw), shares):
        oh, ow = share.shape[2:]
        top, left = i - pt, j - pl
        placed = lax.pad(share, jnp.zeros((), share.dtype),
                         ((0, 0, 0), (0, 0, 0), (top, h - top - sh * (oh - 1) - 1, sh - 1),
                          (left, w - left - sw * (ow - 1) - 1, sw - 1)))
        total = placed if total is None else total + placed
    return total


def _masked(mask, v):
    """``v`` times a 0/1 ``mask``, as numpy multiplies: ``v * 0`` where the mask is off, so an infinite or NaN
    ``v`` gives NaN there (XLA rewrites a product with a converted bool into a select, which would give 0)."""
    return jnp.where(mask, v, v * 0)


def _first_maxima(pool: Pooling, x):
    """The sweep, the output size, and per tap a boolean mask [N, C, OH, OW]: True where this tap holds its
    window's first maximum (a NaN being the maximum where there is one)."""
    sweep = pool.sweep(*x.shape[2:])
    oh, ow = sweep.out_hw(*x.shape[2:])
    taps = _taps(_padded(x, sweep, -np.inf), sweep, oh, ow)
    top = taps[0]
    for t in taps[1:]:
        top = jnp.maximum(top, t)
    nan = jnp.isnan(top)
    taken = jnp.zeros(top.shape, bool)
    masks = []
    for t in taps:
        hit = ((t == top) | (nan & (t != t))) & ~taken
        taken = taken | hit
        masks.append(hit)
    return sweep, (oh, ow), masks


def _pool2d(op, ctx):
    pool = Pooling(op)

    def run(x):
        sweep = pool.sweep(*x.shape[2:])
        dims, strides, pads = _window(sweep)
        if pool.kind == "max":
            return lax.reduce_window(x, jnp.asarray(-np.inf, x.dtype), lax.max, dims, strides, pads)
        total = lax.reduce_window(x, jnp.zeros((), x.dtype), lax.add, dims, strides, pads)
        return total / pool.divisor(x.shape, *total.shape[2:], x.dtype)

    return run


def _pool2d_grad(op, ctx):
    pool = Pooling(op)

    def run(x, gout):
        if pool.kind == "max":
            sweep, _, masks = _first_maxima(pool, x)
            shares = [_masked(m, gout) for m in masks]
        else:
            sweep = pool.sweep(*x.shape[2:])
            share = gout / pool.divisor(x.shape, *gout.shape[2:], x.dtype)
            shares = [share] * (sweep.kh * sweep.kw)
        return _spread(shares, sweep, x.shape)

    return run


def _pool2d_select(op, ctx):
    """Per window, D where X holds the window's first maximum."""
    pool = Pooling(op)

    def run(x, d):
        sweep, (oh, ow), masks = _first_maxima(pool, x)
        taps = _taps(_padded(d, sweep, 0.0), sweep, oh, ow)
        result = _masked(masks[0], taps[0])
        for m, t in zip(masks[1:], taps[1:]):
            result = result + _masked(m, t)
        return result

    return run


LOWERINGS = {"conv2d": _conv2d, "conv2d_input_grad": _conv2d_input_grad, "conv2d_filter_grad": _conv2d_filter_grad,
             "conv2d_transpose": _conv2d_transpose,
             "pool2d": _pool2d, "pool2d_grad": _pool2d_grad, "pool2d_select": _pool2d_select}
