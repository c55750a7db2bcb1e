"""The convolution as the ops' computes call it (``xp.convolution`` and its two adjoints) and pooling's windows
(``xp.pool_taps`` and its adjoint): ``PRIMITIVES``, read as the numpy engine's (``backend/numpy/kernels/conv.py``,
``pooling.py``) from the attrs (``shared/conv.py``).

A convolution is one ``lax.conv_general_dilated`` over 1 to 3 spatial dims (N-C-spatial, filters
O-I-spatial, full precision). Its adjoints (the gradients, and the transposed convolution) are that conv's
transposes, taken by ``jax.linear_transpose``: convolutions again,
the ones XLA is given for JAX's own gradients, with no im2col and nothing materialized.

Pooling's windows are strided slices of the input padded as the numpy kernel pads it (the far sides by what
a ceil-mode window reaches too), which the pooling ops' computes fold (the maximum, the first maxima, the sum),
and their adjoint puts each tap's share back by an interior-padded ``lax.pad``: a strided scatter with no
scatter op, fused with the rest.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ...shared.conv import Pooling, Sweep

__all__ = ["PRIMITIVES"]

_HIGHEST = lax.Precision.HIGHEST


class Window(NamedTuple):
    """A convolution's attrs: per spatial dim its stride, padding (both sides) and dilation, and its groups."""

    strides: tuple
    paddings: tuple
    dilations: tuple
    groups: int


_LAYOUTS = {1: ("NCH", "OIH", "NCH"), 2: ("NCHW", "OIHW", "NCHW"), 3: ("NCDHW", "OIDHW", "NCDHW")}


def _conv_of(win: Window):
    """``conv(x, w)``: the convolution with its strides, paddings, dilations and groups (1-3 spatial dims)."""
    strides, dilations, groups = tuple(win.strides), tuple(win.dilations), win.groups
    pads = tuple((p, p) for p in win.paddings)
    layout = _LAYOUTS[len(strides)]

    def conv(x, w):
        return lax.conv_general_dilated(x, w, strides, pads, rhs_dilation=dilations, dimension_numbers=layout,
                                        feature_group_count=groups, precision=_HIGHEST)

    return conv


def _transposed_in(fn, like_shape: tuple, dtype, cotangent):
    """The transpose of linear ``fn`` (taking an array of ``like_shape``) applied to ``cotangent``."""
    (result,) = jax.linear_transpose(fn, jax.ShapeDtypeStruct(like_shape, dtype))(cotangent)
    return result


def _reads_padding(win: Window, size: int, kernel: int, out: int, dim: int) -> np.ndarray:
    """[kernel, out] bools along spatial ``dim``: the tap at kernel offset k of the window at output position p
    reads the zero padding, not the input of length ``size``."""
    stride, pad, dilation = win.strides[dim], win.paddings[dim], win.dilations[dim]
    at = np.arange(out)[None, :] * stride + np.arange(kernel)[:, None] * dilation - pad
    return (at < 0) | (at >= size)


def _meets_padding(win: Window, bad, spatial_in: tuple, kernel: tuple, out: tuple, onto_kernel: bool):
    """Where products with the zero padding, which XLA's convolution skips, are NaN, as the convolution of the
    zero-padded input has them (0 * inf, 0 * NaN). ``bad`` marks non-finite values per output channel: the output
    gradient's, [O, *out], giving [O, *kernel] filter taps (``onto_kernel``); or the filter's, [O, *kernel],
    giving [O, *out] outputs. One spatial dim at a time: a window's tap reads padding when it does along any
    dim, so each dim's ``any`` is carried through that dim's static (kernel offset, output position) pairs."""
    nan = None
    for d in range(len(kernel)):
        hits = _reads_padding(win, spatial_in[d], kernel[d], out[d], d)  # [kernel_d, out_d]
        if not hits.any():
            continue
        along = jnp.any(bad, axis=tuple(1 + e for e in range(len(kernel)) if e != d))  # [O, size of bad's dim d]
        spread = (along.astype(jnp.float32) @ jnp.asarray(hits.T if onto_kernel else hits, jnp.float32)) > 0
        shape = [1] * (1 + len(kernel))
        shape[0], shape[1 + d] = spread.shape
        spread = spread.reshape(shape)
        nan = spread if nan is None else nan | spread
    return nan


def convolution(x, w, **window):
    """XLA's convolution, which skips the padding, with the padding's zeros multiplied in: a non-finite filter tap
    whose window reads padding makes that output NaN (0 * inf), as the numpy kernel and PyTorch give. The mark is
    built from the filter alone ([O, *out] bools, small) and applied by a ``where`` XLA fuses into what follows:
    the ResNet anchor's xla step 249.5 against 242.9 ms without it (quiet machine, alternating); as a branch on
    the filter's finiteness (``lax.cond``) it took 285 ms."""
    win = Window(**window)
    out = _conv_of(win)(x, w)
    if not any(_reads_padding(win, *sizes, d).any() for d, sizes in
               enumerate(zip(x.shape[2:], w.shape[2:], out.shape[2:]))):
        return out
    bad = jnp.any(~jnp.isfinite(w), axis=1)  # [O, *kernel]
    nan = _meets_padding(win, bad, x.shape[2:], w.shape[2:], out.shape[2:], onto_kernel=False)
    return jnp.where(nan[None], jnp.asarray(jnp.nan, out.dtype), out)


def _sweep_of(win: Window, w_shape) -> Sweep:
    """The op's kernel sweep (its paddings on both sides of each dim) for a filter of ``w_shape``."""
    pads = tuple(p for p in win.paddings for _ in (0, 1))
    return Sweep(tuple(w_shape[2:]), tuple(win.strides), tuple(win.dilations), pads)


def _adjoint_by_taps(win: Window, w, gout, shape: tuple):
    """conv's adjoint in its input, tap by tap: per kernel offset (row-major), the products of that filter tap and
    the output gradient (one einsum over each group's output channels, [N, C, *out]), spread by the stride's
    gaps (an interior-padded ``lax.pad``) and added where the tap reads in the padded input, which is then cut
    to ``shape``. Products only between the filter and the output gradient (``numerics.md``, rule 5), and no
    convolution for XLA to rewrite. A loop over the taps, so that one tap's arrays are live at a time."""
    sweep = _sweep_of(win, w.shape)
    groups, (n, o), cg, out = win.groups, gout.shape[:2], w.shape[1], gout.shape[2:]
    grouped = gout.reshape(n, groups, o // groups, *out)
    taps = jnp.moveaxis(w.reshape(groups, o // groups, cg, -1), -1, 0)  # [taps, groups, O/G, C/G]
    starts = jnp.asarray([[i * dl for i, dl in zip(at, sweep.dilations)] for at in np.ndindex(*sweep.kernel)])
    gaps = [(0, 0, 0), (0, 0, 0)] + [(0, 0, st - 1) for st in sweep.strides]
    padded = (n, groups * cg) + tuple(size + 2 * p for size, p in zip(shape[2:], win.paddings))

    def add_tap(t, total):
        share = jnp.einsum("ngo...,goc->ngc...", grouped, taps[t], precision=_HIGHEST).reshape(n, groups * cg, *out)
        spread = lax.pad(share, jnp.zeros((), share.dtype), gaps)
        at = (0, 0, *(starts[t, d] for d in range(len(out))))
        return lax.dynamic_update_slice(total, lax.dynamic_slice(total, at, spread.shape) + spread, at)

    total = lax.fori_loop(0, taps.shape[0], add_tap, jnp.zeros(padded, gout.dtype))
    pads = win.paddings
    return lax.slice(total, (0, 0, *pads), (n, groups * cg, *(p + size for p, size in zip(pads, shape[2:]))))


def _swap_aborts(win: Window, w_shape, size) -> bool:
    """Whether the transposed convolution of the input gradient has a dim XLA's operand swap keeps as a "group"
    dim (no padding, undilated, the stride's zeros as many as the kernel's taps: kernel == stride >= 2, padding
    kernel - 1, a size the windows tile exactly). Swapping such a convolution, XLA's algebraic simplifier
    keeps that dim's window while the operands' sizes change, fails its own shape check and aborts the process
    (jax 0.10.2: x [2, 2, 5, 4, 3], filter [4, 2, 3, 2, 3], stride 2, padding 1; and in 2-D, x [2, 2, 4, 2],
    filter [4, 2, 2, 3], strides (2, 1), padding 1). Whether it swaps depends on its cost model, so every
    convolution with such a dim is kept away from it."""
    for n, k, s, p, d in zip(size, w_shape[2:], win.strides, win.paddings, win.dilations):
        out = (n + 2 * p - (k - 1) * d - 1) // s + 1
        low = (k - 1) * d - p  # the transposed convolution's padding of the strided output gradient
        high = n - (out - 1) * s - 1 - low + (k - 1) * d
        if k == s >= 2 and d == 1 and low == 0 and high == 0:
            return True
    return False


def _input_adjoint(win: Window, w, gout, shape: tuple):
    """The input gradient (or transposed convolution) of ``gout`` at ``shape``: XLA's transposed convolution for a
    finite filter (and, with groups, a finite ``gout``); tap by tap otherwise, as XLA's multiplies the filter by
    the zeros between and around the output gradient (0 * inf), and with groups an infinite ``gout`` by zeros
    of other groups, which the adjoint has not; and tap by tap where XLA would abort compiling it
    (``_swap_aborts``)."""
    if _swap_aborts(win, w.shape, shape[2:]):
        return _adjoint_by_taps(win, w, gout, shape)
    conv = _conv_of(win)
    result = _transposed_in(lambda v: conv(v, w), shape, gout.dtype, gout)
    finite = jnp.all(jnp.isfinite(w))
    if win.groups > 1:
        finite = finite & jnp.isfinite(jnp.sum(gout))  # finite when every element is (or taps: a huge sum)
    # the convolution stays outside the branch: inside a conditional XLA's CPU convolution ran 100 times slower.
    # The branch not taken still costs: a lone [32, 64, 32, 32] gradient 14 -> 17.5 ms; the ResNet anchor's xla
    # step, within its noise (numerics.md)
    exact = lambda result, w, gout: _adjoint_by_taps(win, w, gout, shape)  # noqa: E731
    return lax.cond(finite, lambda result, w, gout: result, exact, result, w, gout)


def convolution_input_adjoint(w, gout, shape, **window):
    """The convolution's adjoint in its input (of ``shape``; the transposed convolution too); positions no window
    reached get zero."""
    return _input_adjoint(Window(**window), w, gout, tuple(shape))


def _filter_grad_by_taps(win: Window, x, gout, w_shape):
    """conv's adjoint in its filter, tap by tap: per kernel offset, the window's strided view of the zero-padded
    input times the output gradient, summed over the batch and the output positions, per group (an einsum).
    The padding's zeros are multiplied, as the numpy kernel does; no product crosses groups."""
    sweep = _sweep_of(win, w_shape)
    groups, n, out = win.groups, x.shape[0], gout.shape[2:]
    o, cg = w_shape[:2]
    grouped = gout.reshape(n, groups, o // groups, *out)
    taps = [jnp.einsum("ngc...,ngo...->goc", t.reshape(n, groups, cg, *out), grouped, precision=_HIGHEST)
            .reshape(o, cg) for t in _taps(_padded(x, sweep, 0.0), sweep, out)]
    return jnp.stack(taps, axis=-1).reshape(w_shape)


def convolution_filter_adjoint(x, gout, shape, **window):
    """The convolution's adjoint in its filter (of ``shape``), with the padding's zeros multiplied in: a non-finite
    output gradient at a window that reads padding makes those taps NaN (0 * inf), as PyTorch and the numpy kernel
    give. With groups and a non-finite input or output gradient, tap by tap (``_filter_grad_by_taps``): XLA's
    grouped filter gradient multiplies them by zeros of other groups (NaN where no product of the gradient has
    one)."""
    win, shape = Window(**window), tuple(shape)
    conv = _conv_of(win)
    grad = _transposed_in(lambda v: conv(x, v), shape, x.dtype, gout)
    if win.groups > 1:  # XLA's grouped filter gradient multiplies other groups' values by zeros
        finite = jnp.isfinite(jnp.sum(gout)) & jnp.isfinite(jnp.sum(x))
        exact = lambda grad, x, gout: _filter_grad_by_taps(win, x, gout, shape)  # noqa: E731
        return lax.cond(finite, lambda grad, x, gout: grad, exact, grad, x, gout)
    if not any(_reads_padding(win, *sizes, d).any() for d, sizes in
               enumerate(zip(x.shape[2:], shape[2:], gout.shape[2:]))):
        return grad

    def marked(grad):
        bad = jnp.any(~jnp.isfinite(gout), axis=0)  # [O, *out]
        nan = _meets_padding(win, bad, x.shape[2:], shape[2:], gout.shape[2:], onto_kernel=True)
        return jnp.where(nan[:, None], jnp.asarray(jnp.nan, grad.dtype), grad)

    # a branch, so that a finite output gradient costs one look at it (its sum is finite when every element is)
    return lax.cond(jnp.isfinite(jnp.sum(gout)), lambda grad: grad, marked, grad)


# -- pooling ---------------------------------------------------------------------------------------------------

def _pairs(sweep: Sweep) -> list[tuple[int, int]]:
    """(before, after) padding per spatial dim."""
    return [(sweep.pads[2 * d], sweep.pads[2 * d + 1]) for d in range(len(sweep.kernel))]


def _padded(x, sweep: Sweep, value: float):
    return lax.pad(x, jnp.asarray(value, x.dtype), [(0, 0, 0), (0, 0, 0)] + [(b, a, 0) for b, a in _pairs(sweep)])


def _taps(xp, sweep: Sweep, out: tuple) -> list:
    """The [N, C, *out] strided slices of padded ``xp`` that the window's taps meet, row-major."""
    n, c = xp.shape[:2]
    taps = []
    for at in np.ndindex(*sweep.kernel):
        start = [i * dl for i, dl in zip(at, sweep.dilations)]
        stop = [b + s * (o - 1) + 1 for b, s, o in zip(start, sweep.strides, out)]
        taps.append(lax.slice(xp, (0, 0, *start), (n, c, *stop), (1, 1, *sweep.strides)))
    return taps


def _spread(shares: list, sweep: Sweep, shape: tuple):
    """An N-C-spatial array of ``shape``: each tap's [N, C, *out] share added back where the tap reads (the
    adjoint of ``_taps`` and the padding): one interior-padded ``lax.pad`` per tap, the padding cut off by
    negative edges."""
    total = None
    for at, share in zip(np.ndindex(*sweep.kernel), shares):
        config = [(0, 0, 0), (0, 0, 0)]
        for d, (i, n, o) in enumerate(zip(at, shape[2:], share.shape[2:])):
            low = i * sweep.dilations[d] - sweep.pads[2 * d]
            config.append((low, n - low - sweep.strides[d] * (o - 1) - 1, sweep.strides[d] - 1))
        placed = lax.pad(share, jnp.zeros((), share.dtype), config)
        total = placed if total is None else total + placed
    return total


def pool_taps(x, value: float, **window) -> list:
    """The window's taps of ``x`` padded with ``value``: [N, C, *out] strided slices, row-major."""
    sweep = Pooling(**window).sweep(x.shape[2:])
    return _taps(_padded(x, sweep, value), sweep, sweep.out_size(x.shape[2:]))


def add_pool_taps(shares: list, shape, **window):
    """``pool_taps``' adjoint: each share added back where its tap reads (``_spread``)."""
    return _spread(shares, Pooling(**window).sweep(tuple(shape)[2:]), tuple(shape))


def pool_divisor(x, out, *, exclusive: bool, **window):
    """Per window its in-bounds elements (``exclusive``) or its area: a constant of ``x``'s dtype."""
    return Pooling(exclusive=exclusive, **window).divisor(x.shape, out, np.dtype(x.dtype))


PRIMITIVES = {"convolution": convolution, "convolution_input_adjoint": convolution_input_adjoint,
              "convolution_filter_adjoint": convolution_filter_adjoint,
              "pool_taps": pool_taps, "add_pool_taps": add_pool_taps, "pool_divisor": pool_divisor}
"""The convolution and pooling's windows as the ops' computes call them (``program/ops/conv.py``): ``xp.<name>``
of this engine."""
