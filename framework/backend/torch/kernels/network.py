"""Layer normalization in the torch engine on ATen's fused ``native_layer_norm``, its gradient on
``native_layer_norm_backward`` (``FASTER`` says why each stays beside the op's compute), the rows' statistics from
``native_layer_norm``: the compute where they do not run or would part from it (float16, empty tensors, values
that are not finite, magnitudes near the end of the float range, rows whose mean lies far from 0, and for the
forward's Variance rows whose variance is under epsilon)."""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch

from gradgen.program.ops import OP_SCHEMAS
from gradgen.program.shapes import normalize_axis

from ...derive import call_of
from ..xp import XP
from .derived import derived_kernel
from .finite import fused, known_finite
from .kept import keep, kept

__all__ = ["FASTER", "KERNELS"]

_aten = torch.ops.aten

# ATen's kernel where it gives the compute's numbers to rounding, the compute elsewhere. Besides float16 and empty
# tensors, that is values that are not finite (an infinite dY puts NaN and infinities in other places of ATen's dX
# than of the compute's), rows far from 0 (``_SPREAD``), and, since ATen's gradient sums dY * X where the compute
# sums dY * (X - mean), magnitudes at which one could overflow where the other does not: the guards keep every
# intermediate of both 16 times below the dtype's largest value, read from the inputs' largest magnitudes
# (``_largest``, one pass each, about as cheap as ``all_finite``'s sum; NaN fails every guard) and the rows'
# statistics (``_rows``).

def _largest(t: torch.Tensor) -> float:
    """The largest magnitude in ``t``: NaN if it holds a NaN (``aminmax`` gives NaN for both), inf if an
    infinity."""
    if t.numel() == 0:
        return 0.0
    low, high = torch.aminmax(t)
    return max(-float(low), float(high))


def _one_or_more(v: float) -> float:
    """max(1, v), NaN kept (Python's max would drop it)."""
    return 1.0 if v < 1.0 else v


_MOST = {dtype: torch.finfo(dtype).max for dtype in (torch.float32, torch.float64)}
"""Each dtype's largest finite value, which the guards keep every intermediate 16 times below."""


@functools.lru_cache(maxsize=None)
def _rounded(value: float, dtype: torch.dtype) -> float:
    """``value`` rounded to ``dtype``, as ATen's layer norm adds its epsilon."""
    return float(torch.tensor(value, dtype=dtype))


_SPREAD = 100.0
"""How far a row's mean may lie from 0 for ATen's layer norm kernels, in |mean| sqrt(var) / (var + eps): its
standard deviations where var >> eps, less where the row is nearly constant. ATen forms the variance by Welford's
updates and dX from X, not X - mean, so both lose about that many ulp where the compute, centring first, keeps its
variance and loses less in dX: float32 rows [64, 256] 100 deviations out parted the variance from numpy's by 2.2e-6
(the derived kernel 1e-7) and dX by 1.3e-6 (6.7e-7); 1000 out by 1.2e-5 and 1.1e-5 (1e-7, 3.1e-6), past the
engines' 1e-5. Y parts as the compute's own rounding does (at 1000 3.4e-5 and 3.5e-5); a constant row of several
values parts in nothing more than its mean's rounding in the compute."""


class _Rows(NamedTuple):
    """What the gradient's guards read from ATen's statistics of the rows (n values each)."""

    fit: bool
    """Every row's mean within ``_SPREAD`` of 0 and no NaN in X (which makes its row's statistics NaN; an infinity
    makes ``span`` infinite or NaN, which the magnitude guards refuse)."""
    span: float
    """max(1, |mean| + sqrt(n) / rstd), a bound on every |x| (|x - mean| <= sqrt(n var), 1 / rstd = sqrt(var +
    eps))."""
    top: float
    """max(1, rstd)."""


def _rows(mean: torch.Tensor, rstd: torch.Tensor, n: int, eps: float) -> _Rows:
    away, inverse = mean.abs(), rstd.reciprocal()
    variance = inverse * inverse - eps  # ATen gives rstd = 1 / sqrt(var + eps)
    span = float(torch.max(torch.add(away, inverse, alpha=math.sqrt(n))))
    spread = float(torch.max(away * variance.clamp(min=0).sqrt() * rstd * rstd))
    return _Rows(spread <= _SPREAD, _one_or_more(span), _one_or_more(float(torch.max(rstd))))


def _statistics_key(norm: list, eps: float) -> tuple:
    """What ``native_layer_norm``'s mean and rstd of a tensor depend on besides it (``kept``)."""
    return "layer_norm", tuple(norm), eps


def _statistics(x: torch.Tensor, norm: list, n: int, eps: float) -> tuple[torch.Tensor, torch.Tensor, _Rows]:
    """``native_layer_norm``'s mean and rstd of ``x``'s rows and what the guards read from them."""
    _, mean, rstd = _aten.native_layer_norm(x, norm, None, None, eps)
    return mean, rstd, _rows(mean, rstd, n, _rounded(eps, x.dtype))


def layer_norm(op):
    """(Y, Mean, Variance) from ATen's ``native_layer_norm``: Y as it makes it, Mean its own, Variance recovered from
    its 1 / sqrt(var + eps) as 1 / rstd**2 - eps (ATen keeps no variance; ``torch.var_mean``, a second pass, took
    2.4 ms over the transformer's rows, ``native_layer_norm`` 0.27). The compute for float16, an empty or 0-d X,
    rows of one value, where ``_Rows.fit`` fails (ATen's Welford moments and its Y, formed as X rstd - mean rstd,
    part from the compute's centred ones by the row's spread in ulp), where 16 max|x| max(1, rstd) max(1, |Scale|)
    + |Bias| passes the dtype's largest value (X, Scale or Bias not finite among them), and where a row's variance
    is under epsilon (recovering it from var + eps would lose its digits: at var = epsilon the float32 error is
    about 5e-7 of it, twice that of a row far above). Y of a finite X, Scale and Bias so bounded is finite: known
    finite for the products that read it."""
    schema, eps, begin_attr = OP_SCHEMAS["layer_norm"], op.attr("epsilon"), op.attr("begin_norm_axis")
    computed = derived_kernel(schema, XP)(op)
    has_scale, has_bias = bool(op.input("Scale")), bool(op.input("Bias"))

    def run(x, *rest):
        if not fused(x) or x.ndim == 0:
            return computed(x, *rest)
        scale, bias = rest[0] if has_scale else None, rest[-1] if has_bias else None
        begin = normalize_axis(begin_attr, x.ndim)
        lead, norm = tuple(x.shape[:begin]), list(x.shape[begin:])
        n = math.prod(norm)
        if n == 1:
            return computed(x, *rest)
        y, mean, rstd = _aten.native_layer_norm(x, norm, scale, bias, eps)
        epsilon = _rounded(eps, x.dtype)
        rows = _rows(mean, rstd, n, epsilon)
        keep(x, _statistics_key(norm, eps), (mean, rstd, rows))
        g = 1.0 if scale is None else _one_or_more(_largest(scale))
        bound = 16 * rows.span * rows.top * g + (0.0 if bias is None else _largest(bias))
        if not (rows.fit and bound <= _MOST[x.dtype]):
            return computed(x, *rest)
        variance = rstd.reciprocal().square_().sub_(epsilon)
        if not float(torch.min(variance)) >= epsilon:
            return computed(x, *rest)
        known_finite(y)
        return y, mean.reshape(lead), variance.reshape(lead)

    return run


def layer_norm_grad(op):
    """On ATen's ``native_layer_norm_backward``, the rows' statistics from ``native_layer_norm`` (the forward
    kernel's, kept while X lives, as batch norm's are: ``kept``; else made again); the compute for
    float16, an empty or 0-d X, rows of one value, where ``_Rows.fit`` fails, and where 16 max(n, rows) max|dY|
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
        mean, rstd, rows = kept(x, _statistics_key(norm, eps)) or _statistics(x, norm, n, eps)
        g = 1.0 if scale is None else _one_or_more(_largest(scale))
        bound = 16 * max(n, x.numel() // n) * _largest(dy) * g * rows.span ** 2 * rows.top ** 3
        if not (rows.fit and bound <= _MOST[x.dtype]):
            return computed(x, *rest)
        # ATen makes Scale@GRAD only beside a weight (ones where the op has no Scale: the same numbers) and
        # Bias@GRAD only beside a bias, whose values it does not read
        weight = torch.ones(norm, dtype=x.dtype) if scale is None and wants[1] else scale
        like = (weight if weight is not None else x.new_empty(norm)) if wants[2] else None
        outs = tuple(_aten.native_layer_norm_backward(dy, x, norm, mean, rstd, weight, like, wants))
        return outs if pick is None else pick(outs)

    return run


KERNELS = {"layer_norm": layer_norm, "layer_norm_grad": layer_norm_grad}

FASTER = {
    "layer_norm": "ATen's native_layer_norm with its guards took 0.53-0.73 ms on the transformer's [16, 128, 256] "
                  "float32 over the last dim inside its step (two threads), the op's formulas 1.5; alone 0.27 "
                  "against 1.2",
    "layer_norm_grad": "ATen's native_layer_norm_backward, with native_layer_norm for the rows' statistics, took "
                       "0.54 ms on the transformer's [16, 128, 256] float32 over the last dim (two threads), the "
                       "op's formulas 0.90-1.2",
}
"""op type -> why its kernel here stays beside the op's compute (``backend/derive.with_derived``)."""
