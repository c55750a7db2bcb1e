"""Dropout in the torch engine, its masks drawn on the host as every engine draws them (``shared/network``), and
layer normalization's gradient on ATen's fused ``native_layer_norm_backward`` (``FASTER`` says
why it stays beside the op's compute), the rows' statistics those the forward's ``native_layer_norm`` kept
(``kept.ATEN``, as PyTorch's autograd saves them) or made again: the compute where they do not run or would part
from it (float16, empty tensors, values that are not finite, magnitudes near the end of the float range, rows whose
mean lies far from 0: the op's guards, ``program/ops/network.py``, beside its forward's one ATen call,
``layer_norm_aten``)."""
from __future__ import annotations

import math

import numpy as np
import torch

from gradgen.program.ops import OP_SCHEMAS
from gradgen.program.ops.network import AtenRows, aten_rows, largest, most, rounded
from gradgen.program.shapes import normalize_axis

from ...derive import call_of
from ...shared.network import dropout_mask, dropout_stream
from ..xp import XP
from . import kept
from .derived import derived_kernel
from .finite import fused

__all__ = ["FASTER", "KERNELS"]

_aten = torch.ops.aten


def _statistics(x: torch.Tensor, norm: list, n: int, eps: float) -> tuple[torch.Tensor, torch.Tensor, AtenRows]:
    """``native_layer_norm``'s mean and rstd of ``x``'s rows (kept by the forward, or made again) and what the
    guards read from them."""
    found = kept.kept(x, kept.row_statistics_key(norm, eps))
    mean, rstd = found if found else _aten.native_layer_norm(x, norm, None, None, eps)[1:]
    return mean, rstd, aten_rows(mean, rstd, n, rounded(eps, x))


def layer_norm_grad(op):
    """On ATen's ``native_layer_norm_backward``, the rows' statistics from ``native_layer_norm``; the compute for
    float16, an empty or 0-d X, rows of one value, where ``AtenRows.fit`` fails (the guards are the op's, beside
    its ATen forward: ``program/ops/network.py``), and where 16 max(n, rows) max|dY|
    max(1, |Scale|) max|x|**2 max(1, rstd)**3 passes the dtype's largest value (dY or Scale not finite among them:
    an infinite dY gives NaN and infinities in other places of ATen's dX than of the compute's). ATen forms dX from
    X, not X - mean: b X + c with b = (sum(dY Scale) mean - sum(dY Scale X)) rstd**3 / n."""
    schema, eps, begin_attr = OP_SCHEMAS["layer_norm_grad"], op.attr("epsilon"), op.attr("begin_norm_axis")
    computed, pick = derived_kernel(schema, XP)(op), call_of(schema, op).pick
    has_scale = bool(op.input("Scale"))
    wants = [bool(op.output(s)) for s in ("X@GRAD", "Scale@GRAD", "Bias@GRAD")]

    def run(x, *rest):
        if not fused(x) or x.ndim == 0:
            return computed(x, *rest)
        scale, dy = rest[0] if has_scale else None, rest[-1]
        begin = normalize_axis(begin_attr, x.ndim)
        norm = list(x.shape[begin:])
        n = math.prod(norm)
        # a row of one value is its own mean: the compute's X - mean, dX and Scale@GRAD are 0 exactly, where ATen's
        # Scale@GRAD sums dY (rstd X - rstd mean) with a fused multiply-add, which leaves the rounding of rstd X (rstd
        # 1 / sqrt(eps), ~316): 0.17 over six float32 values of 1e4, 9e-11 in float64 (the random-program
        # differential test, seed 1251 of three pieces)
        if n == 1:
            return computed(x, *rest)
        mean, rstd, rows = _statistics(x, norm, n, eps)
        if not (rows.fit and rows.gradient_bound(max(n, x.numel() // n), largest(dy), scale) <= most(x)):
            return computed(x, *rest)
        # ATen makes Scale@GRAD only beside a weight (ones where the op has no Scale: the same numbers) and
        # Bias@GRAD only beside a bias, whose values it does not read
        weight = torch.ones(norm, dtype=x.dtype) if scale is None and wants[1] else scale
        like = (weight if weight is not None else x.new_empty(norm)) if wants[2] else None
        outs = tuple(_aten.native_layer_norm_backward(dy, x, norm, mean, rstd, weight, like, wants))
        return outs if pick is None else pick(outs)

    return run


def dropout(op):
    """The numpy kernel's masks, one stream per built step (a fixed seed gives the same masks run after run, as on
    numpy and xla), drawn on the host and multiplied here: Out and Mask bit for bit the reference's."""
    p, is_test = op.attr("p"), op.attr("is_test")
    dtype = np.dtype(op.block.var(op.input("X")[0]).dtype)
    stream = dropout_stream(op)

    def run(x):
        if is_test or p == 0.0:
            return x, torch.ones_like(x)
        mask = torch.from_numpy(dropout_mask(stream, tuple(x.shape), p, dtype))
        return x * mask, mask

    return run


KERNELS = {"layer_norm_grad": layer_norm_grad, "dropout": dropout}

FASTER = {
    "layer_norm_grad": "ATen's native_layer_norm_backward, with native_layer_norm for the rows' statistics, took "
                       "0.54 ms on the transformer's [16, 128, 256] float32 over the last dim (two threads), the "
                       "op's formulas 0.90-1.2",
}
"""op type -> why its kernel here stays beside the op's compute (``backend/derive.with_derived``)."""
