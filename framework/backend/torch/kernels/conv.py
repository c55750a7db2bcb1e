"""The convolution on ATen (oneDNN on the CPU), as the ops' computes call it (``PRIMITIVES``):
``aten.convolution`` forward and ``aten.convolution_backward`` for its adjoints (one call for both where a block
asks for both: ``JOINT``), 1 to 3 spatial dims. Pooling's windows are the taps the pooling ops' computes fold, as
every engine reads them (``shared/conv.Pooling``), not ATen's pooling: on LeNet's [64, 6, 24, 24] float32, one
thread, ``aten.max_pool2d`` took 0.87 ms and the four taps' maximum 0.074; ATen's max pooling with indices and its
backward stay where they measured faster (``FASTER``)."""
from __future__ import annotations


import numpy as np
import torch

from gradgen.program.ops import OP_SCHEMAS

from ...derive import with_primitives
from ...shared.conv import Pooling, Sweep
from ..xp import XP
from . import kept
from .derived import derived_kernel
from .finite import all_finite, known_finite

__all__ = ["FASTER", "JOINT", "KERNELS", "PRIMITIVES"]

_aten = torch.ops.aten


def _padded_input(x: torch.Tensor, pads) -> torch.Tensor:
    """``x`` with its zero padding made real: oneDNN never multiplies the padding it leaves implicit, so an
    infinite or NaN operand met there gives inf where numpy's padded columns give 0 * inf = NaN."""
    widths = [p for d in reversed(range(len(pads))) for p in (pads[d], pads[d])]
    return torch.nn.functional.pad(x, widths)


def convolution(x, w, *, strides, paddings, dilations, groups: int) -> torch.Tensor:
    """``aten.convolution``; over the explicitly padded input where an operand is not finite
    (``_padded_input``)."""
    zeros = [0] * len(strides)
    if any(paddings) and not all_finite(x, w):
        return _aten.convolution(_padded_input(x, paddings), w, None, list(strides), zeros, list(dilations), False,
                                 zeros, groups)
    return _aten.convolution(x, w, None, list(strides), list(paddings), list(dilations), False, zeros, groups)


def _adjoints(x, w, gout, wanted: tuple[bool, bool], strides, paddings, dilations, groups: int) -> tuple:
    """The convolution's adjoints in its input and its filter, those ``wanted`` says (the other None), from one
    ``aten.convolution_backward``; with a non-finite operand, over the explicitly padded input
    (``_padded_input``), the input's cropped back. ``x`` and ``w`` may be stand-ins of their shapes (only the
    shape of the one whose adjoint is wanted is read)."""
    mask, zeros = [*wanted, False], [0] * len(strides)
    strides, dilations = list(strides), list(dilations)
    read = [gout] + [w] * wanted[0] + [x] * wanted[1]  # the operands whose values an adjoint wanted reads
    if any(paddings) and not all_finite(*read):
        gx, gw, _ = _aten.convolution_backward(gout, _padded_input(x, paddings), w, None, strides, zeros, dilations,
                                               False, zeros, groups, mask)
        if gx is not None:
            gx = gx[(slice(None), slice(None)) + tuple(slice(p, p + n) for p, n in zip(paddings, x.shape[2:]))]
        return gx, gw
    gx, gw, _ = _aten.convolution_backward(gout, x, w, None, strides, list(paddings), dilations, False, zeros,
                                           groups, mask)
    return gx, gw


def _stand_in(shape, like: torch.Tensor) -> torch.Tensor:
    """Zeros of ``shape`` in ``like``'s dtype that hold no memory (a broadcast scalar): an operand
    ``convolution_backward`` reads only the shape of."""
    return torch.zeros((), dtype=like.dtype).expand(tuple(shape))


def convolution_input_adjoint(w, gout, shape, **window) -> torch.Tensor:
    return _adjoints(_stand_in(shape, w), w, gout, (True, False), **window)[0]


def convolution_filter_adjoint(x, gout, shape, **window) -> torch.Tensor:
    return _adjoints(x, _stand_in(shape, x), gout, (False, True), **window)[1]


def _window(op) -> dict:
    return {name: op.attr(name) for name in ("strides", "paddings", "dilations", "groups")}


def both_adjoints(input_op, filter_op):
    """Both gradients of one convolution (the input adjoint's op and then the filter adjoint's, over the same
    inputs and attrs) from one ``aten.convolution_backward``: on ResNet's [32, 64, 32, 32] float32, 3x3, two
    threads, the input's gradient alone took 14.9 ms, the filter's 12.5 ms, both in one call 20.8 ms."""
    window = _window(input_op)
    return lambda w, gout, x: _adjoints(x, w, gout, (True, True), **window)


def both_adjoints_filter_first(filter_op, input_op):
    window = _window(filter_op)

    def run(x, gout, w):
        gx, gw = _adjoints(x, w, gout, (True, True), **window)
        return gw, gx

    return run


# -- pooling ----------------------------------------------------------------------------------------------------
def _padded(x: torch.Tensor, sweep: Sweep, value: float) -> torch.Tensor:
    if not sweep.padded():
        return x
    pads = [p for d in reversed(range(len(sweep.kernel))) for p in (sweep.pads[2 * d], sweep.pads[2 * d + 1])]
    return torch.nn.functional.pad(x, pads, value=value)


def _tap(x: torch.Tensor, sweep: Sweep, at, out) -> tuple:
    """The index of the [N, C, *out] part of padded ``x`` that tap ``at`` meets."""
    return (slice(None), slice(None)) + tuple(slice(i * d, i * d + s * (o - 1) + 1, s) for i, d, s, o in
                                              zip(at, sweep.dilations, sweep.strides, out))


def _taps(pool: Pooling, x: torch.Tensor, value: float):
    sweep = pool.sweep(tuple(x.shape[2:]))
    out = sweep.out_size(tuple(x.shape[2:]))
    xp = _padded(x, sweep, value)
    return sweep, out, [xp[_tap(xp, sweep, at, out)] for at in np.ndindex(*sweep.kernel)]


def _divisor(pool: Pooling, x: torch.Tensor, out):
    d = pool.divisor(tuple(x.shape), out, np.dtype(str(x.dtype).removeprefix("torch.")))
    return torch.from_numpy(np.ascontiguousarray(d)) if isinstance(d, np.ndarray) else float(d)


def _gradient_reads(op) -> bool:
    """Whether a ``pool2d_grad`` of ``op``'s block pools ``op``'s input with ``op``'s attrs (it can take the window
    indices ``op``'s kernel keeps)."""
    return any(other.type == "pool2d_grad" and other.input("X") == op.input("X") and other.attrs == op.attrs
               for other in op.block.ops)


def _aten_fits(aten_args, x: torch.Tensor) -> bool:
    return aten_args is not None and x.ndim == 4 and x.dtype in (torch.float32, torch.float64)


def pool2d(op):
    """A max pooling whose gradient the block computes is ATen's ``max_pool2d_with_indices``, the indices kept for
    the gradient (``kept``): the same values, NaN and -inf included, and the gradient spared running it again.
    Otherwise the op's compute over the taps (on LeNet's [64, 6, 24, 24], one thread, 0.074 ms against
    ``aten.max_pool2d``'s 0.87)."""
    pool, computed = Pooling.of(op), derived_kernel(OP_SCHEMAS["pool2d"], _XP)(op)
    aten_args = _aten_max_pool(pool) if _gradient_reads(op) else None

    def run(x):
        if _aten_fits(aten_args, x):
            out, index = _aten.max_pool2d_with_indices(x, *aten_args, False)
            if tuple(out.shape[2:]) == pool.sweep(tuple(x.shape[2:])).out_size(tuple(x.shape[2:])):
                kept.keep(x, ("max_pool", tuple(map(tuple, aten_args))), (out, index))
                return out
        return computed(x)

    return run


def add_pool_taps(shares: list, shape, **window) -> torch.Tensor:
    """``pool_taps``' adjoint: a fresh N-C-spatial tensor of ``shape`` holding each share added where its tap
    reads."""
    sweep, size = Pooling(**window).sweep(tuple(shape)[2:]), tuple(shape)[2:]
    gxp = torch.zeros(tuple(shape)[:2] + sweep.padded_size(size), dtype=shares[0].dtype)
    for at, share in zip(np.ndindex(*sweep.kernel), shares):
        gxp[_tap(gxp, sweep, at, tuple(share.shape[2:]))] += share
    return gxp[sweep.inner(size)] if sweep.padded() else gxp


def pool_taps(x: torch.Tensor, value: float, **window) -> list:
    """The window's taps of ``x`` padded with ``value``: [N, C, *out] views, row-major."""
    return _taps(Pooling(**window), x, value)[2]


def pool_divisor(x: torch.Tensor, out, *, exclusive: bool, **window):
    """Per window its in-bounds elements (``exclusive``) or its area, in ``x``'s dtype."""
    return _divisor(Pooling(exclusive=exclusive, **window), x, out)


def _aten_max_pool(pool: Pooling):
    """ATen's max_pool2d arguments (kernel, strides, pads, dilations) for this pooling, or None where ATen's rules
    part from the sweep's (another kind or rank, uneven padding, ceil mode)."""
    pads = pool.pads
    if pool.kind != "max" or len(pool.ksize) != 2 or pool.ceil_mode or \
            any(pads[2 * d] != pads[2 * d + 1] or 2 * pads[2 * d] > pool.ksize[d] for d in range(2)):
        return None
    return list(pool.ksize), list(pool.strides), [pads[0], pads[2]], list(pool.dilations)


def pool2d_grad(op):
    """A max window's gradient by ATen (``max_pool2d_with_indices`` and its backward) where the input and the
    output gradient are finite and the geometry is ATen's: ATen's window takes its first maximum too, and only a
    NaN (the last one there, the first here) or an infinite gradient (0 * inf in the other taps here) tells the
    two apart. Otherwise the op's compute. Where no two windows share an element (LeNet's), each element of the
    gradient is one of the finite output gradient's or 0: known finite for the next kernel reading it (relu's
    gradient, which summed all 221 k of LeNet's first one each step)."""
    pool, computed = Pooling.of(op), derived_kernel(OP_SCHEMAS["pool2d_grad"], _XP)(op)
    aten_args = _aten_max_pool(pool)
    disjoint = all(s >= dl * (k - 1) + 1 for k, s, dl in zip(pool.ksize, pool.strides, pool.dilations))

    def run(x, gout):
        if _aten_fits(aten_args, x) and all_finite(x, gout):
            found = kept.kept(x, ("max_pool", tuple(map(tuple, aten_args))))
            out, index = found if found else _aten.max_pool2d_with_indices(x, *aten_args, False)
            if out.shape == gout.shape:
                dx = _aten.max_pool2d_with_indices_backward(gout, x, *aten_args, False, index)
                if disjoint:
                    known_finite(dx)
                return dx
        return computed(x, gout)

    return run


KERNELS = {"pool2d": pool2d, "pool2d_grad": pool2d_grad}

FASTER = {
    "pool2d": "a max pooling whose gradient the block computes: ATen's max_pool2d_with_indices keeps the indices, "
              "and the gradient then took 0.035 ms on LeNet's [64, 6, 24, 24] float32 (two threads), 0.31 without "
              "them; other poolings take the compute",
    "pool2d_grad": "ATen's max_pool2d_with_indices_backward took 0.31 ms on LeNet's [64, 6, 24, 24] float32 (two "
                   "threads), the compute's masks 0.64; non-finite values and other geometries take the compute",
}
"""op type -> why its kernel here stays beside the op's compute (``backend/derive.with_derived``)."""

PRIMITIVES = {"convolution": convolution, "convolution_input_adjoint": convolution_input_adjoint,
              "convolution_filter_adjoint": convolution_filter_adjoint,
              "pool_taps": pool_taps, "add_pool_taps": add_pool_taps, "pool_divisor": pool_divisor}
"""The convolution and pooling's windows as the ops' computes call them (``program/ops/conv.py``): ``xp.<name>``
of this engine."""

_XP = with_primitives(XP, PRIMITIVES)
"""This family's ``xp``, for the computes its ``FASTER`` kernels fall back on."""

JOINT = {("conv2d_input_grad", "conv2d_filter_grad"): both_adjoints,
         ("conv2d_filter_grad", "conv2d_input_grad"): both_adjoints_filter_first}
"""(first op type, second op type) -> factory(first op, second op) of one kernel over the first op's inputs that
returns both ops' outputs (``joint.pairs`` says when two ops of a block may share it)."""
