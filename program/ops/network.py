"""Ops behind the network layers that are more than a composition: dropout, lookup_table, batch_norm, layer_norm.

Batch and layer norm have fused gradient ops too (``batch_norm_grad``, ``layer_norm_grad``): one pass over
the data instead of a dozen ordinary ops, each with a grad maker of its own so second order works.

``is_test`` switches dropout and batch norm to inference; ``Program.clone(for_test=True)``
sets it on every op whose schema has it.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ..dtypes import FLOAT_DTYPES, INT_DTYPES
from ..schema import Attr, OnnxMapping, Slot, TensorType, schema
from ..shapes import dims_agree, normalize_axis, shapes_agree
from .manipulation import take
from .nn import check_ids


def _dropout(ctx):
    x = ctx.input("X")
    if not 0.0 <= ctx.attr("p") < 1.0:
        ctx.fail(f"p must be in [0, 1), got {ctx.attr('p')}")
    return {"Out": x, "Mask": x}


def _lookup_table(ctx):
    w, ids = ctx.input("W"), ctx.input("Ids")
    if len(w.shape) != 2:
        ctx.fail(f"W must be a [vocabulary, width] table, got shape {list(w.shape)}")
    return {"Out": TensorType(tuple(ids.shape) + (w.shape[1],), w.dtype)}


def lookup_table(xp, w, ids):
    """W's rows at Ids (an embedding lookup); an id outside [0, rows) is refused (numpy would read -1 as the last
    row, XLA clamp it)."""
    rows = w.shape[0]
    check_ids(xp, ids, rows, f"an id is outside [0, {rows})", "id")
    return take(xp, w, ids, 0)


RUNNING_VARIANCES = ("population", "unbiased")
"""What batch_norm's running Variance moves toward in training (its ``running_variance`` attr): the batch's
population variance (sum of squares / n: ONNX's rule, Paddle's) or its unbiased sample variance (/ (n - 1):
PyTorch's), n = the elements per channel (X's size over its channel count)."""


def running_variance_factor(estimator: str, count: int, shape) -> float:
    """What the batch's population variance is multiplied by in the running Variance's update: 1, or
    n / (n - 1) for "unbiased". A ValueError for "unbiased" with n = 1, whose sample variance is 0 / 0 (PyTorch
    refuses such a batch too): a NaN would poison the running Variance for good."""
    if estimator == "population":
        return 1.0
    if count == 1:
        raise ValueError(f"running_variance='unbiased' needs more than one value per channel, but X of shape "
                         f"{list(shape)} has one (n = 1: the sample variance is 0 / 0)")
    return count / (count - 1)


def moved_statistics(mean, variance, batch_mean, batch_variance, shape, *, momentum: float, running_variance: str):
    """The running Mean and Variance moved toward a training batch's per-channel statistics (its population
    variance; ``shape`` is X's) by 1 - momentum: what batch_norm writes to MeanOut and VarianceOut. Plain
    arithmetic, so every engine's batch norm, fused or not, moves them by this one rule."""
    count = math.prod(shape) // shape[1]
    bessel = running_variance_factor(running_variance, count, shape)
    return (momentum * mean + (1.0 - momentum) * batch_mean,
            momentum * variance + (1.0 - momentum) * bessel * batch_variance)


def _batch_norm(ctx):
    x = ctx.input("X")
    if len(x.shape) < 2:
        ctx.fail(f"X needs a channel axis 1 (rank >= 2), got shape {list(x.shape)}")
    if ctx.attr("running_variance") not in RUNNING_VARIANCES:
        ctx.fail(f"running_variance must be 'population' or 'unbiased', got {ctx.attr('running_variance')!r}")
    per_channel = [d for i, d in enumerate(x.shape) if i != 1]
    if ctx.attr("running_variance") == "unbiased" and not ctx.attr("is_test") and all(d >= 0 for d in per_channel):
        try:
            running_variance_factor("unbiased", math.prod(per_channel), x.shape)
        except ValueError as e:
            ctx.fail(str(e))
    _check_per_channel(ctx, x, ("Scale", "Bias", "Mean", "Variance"))
    return {"Y": x, "MeanOut": ctx.input("Mean"), "VarianceOut": ctx.input("Variance")}


def _check_per_channel(ctx, x: TensorType, slots) -> None:
    c = x.shape[1]
    for slot in slots:
        t = ctx.input(slot)
        if len(t.shape) != 1 or not dims_agree(t.shape[0], c):
            ctx.fail(f"{slot} must be {x.dtype}[{c}] (one per channel), got {t.dtype}{list(t.shape)}")


def _batch_norm_grad(ctx):
    x, dy = ctx.input("X"), ctx.input("Y@GRAD")
    if len(x.shape) < 2:
        ctx.fail(f"X needs a channel axis 1 (rank >= 2), got shape {list(x.shape)}")
    if not shapes_agree(dy.shape, x.shape):
        ctx.fail(f"Y@GRAD must be shaped like X {list(x.shape)}, got {list(dy.shape)}")
    if ctx.attr("is_test") and not (ctx.has_input("Mean") and ctx.has_input("Variance")):
        ctx.fail("with is_test the running Mean and Variance normalize, so both must be given")
    _check_per_channel(ctx, x, [s for s in ("Scale", "Mean", "Variance") if ctx.has_input(s)])
    channel = TensorType((x.shape[1],), x.dtype)
    return {"X@GRAD": x, "Scale@GRAD": channel, "Bias@GRAD": channel}


def _norm_split(ctx) -> int:
    """layer_norm's ``begin_norm_axis`` as an index in [0, rank): the first of the normalized dims."""
    return normalize_axis(ctx.attr("begin_norm_axis"), len(ctx.input("X").shape))


def _check_affine(ctx, x: TensorType, begin: int) -> TensorType:
    """Scale and Bias (when given) are shaped like X's normalized dims; their type."""
    affine = TensorType(tuple(x.shape[begin:]), x.dtype)
    for slot in ("Scale", "Bias"):
        for t in ctx.inputs(slot):
            if not shapes_agree(t.shape, affine.shape):
                ctx.fail(f"{slot} must be shaped like X's normalized dims {list(affine.shape)}, got {list(t.shape)}")
    return affine


def _layer_norm(ctx):
    x = ctx.input("X")
    begin = _norm_split(ctx)
    _check_affine(ctx, x, begin)
    stats = TensorType(tuple(x.shape[:begin]), x.dtype)
    return {"Y": x, "Mean": stats, "Variance": stats}


def _layer_norm_grad(ctx):
    x, dy = ctx.input("X"), ctx.input("Y@GRAD")
    begin = _norm_split(ctx)
    if not shapes_agree(dy.shape, x.shape):
        ctx.fail(f"Y@GRAD must be shaped like X {list(x.shape)}, got {list(dy.shape)}")
    affine = _check_affine(ctx, x, begin)
    return {"X@GRAD": x, "Scale@GRAD": affine, "Bias@GRAD": affine}


_NORM_ATTRS = {"begin_norm_axis": Attr("int", 1), "epsilon": Attr("float", 1e-5)}


# Layer norm's math, once, over ``xp`` (``OpSchema.compute``): X viewed as rows, one per leading index, the
# normalized dims flattened; float16 is computed in float32 (the engines cast the results to the declared dtypes).
def _rows(xp, x, begin_norm_axis: int):
    """X as [leading, normalized] rows in its working dtype, the leading shape and the normalized shape."""
    begin = normalize_axis(begin_norm_axis, x.ndim)
    lead, norm = tuple(x.shape[:begin]), tuple(x.shape[begin:])
    work = xp.float32 if x.dtype == xp.float16 else x.dtype
    return xp.reshape(xp.astype(x, work), (math.prod(lead), math.prod(norm))), lead, norm


def _mean_over(xp, a, axes: tuple[int, ...]):
    """``a``'s mean over ``axes``, kept as size-1 dims: NaN over nothing, without a floating-point exception (the
    sum of nothing times NaN)."""
    n = math.prod(a.shape[i] for i in axes)
    return xp.sum(a, axis=axes, keepdims=True) * (1.0 / n if n else math.nan)


def _row_mean(xp, a):
    """Each row's mean, kept as [rows, 1]."""
    return _mean_over(xp, a, (1,))


def _row_statistics(xp, rows):
    """Each row's mean, its biased variance (kept as [rows, 1]) and the rows centred."""
    mean = _row_mean(xp, rows)
    centred = rows - mean
    return mean, _row_mean(xp, centred * centred), centred


def layer_norm(xp, x, scale, bias, *, begin_norm_axis, epsilon):
    """Y = (X - Mean) / sqrt(Variance + epsilon) * Scale + Bias; Mean, Variance per leading index."""
    rows, lead, norm = _rows(xp, x, begin_norm_axis)
    mean, var, centred = _row_statistics(xp, rows)
    y = centred * (1.0 / xp.sqrt(var + epsilon))
    if scale is not None:
        y = y * xp.reshape(xp.astype(scale, rows.dtype), (1, -1))
    if bias is not None:
        y = y + xp.reshape(xp.astype(bias, rows.dtype), (1, -1))
    return xp.reshape(y, x.shape), xp.reshape(mean, lead), xp.reshape(var, lead)


# Where ATen's layer norm kernels (the torch engine's: ``layer_norm_aten`` here, the gradient's kernel in
# ``backend/torch/kernels/network.py``) give the compute's numbers to rounding. Besides float16 and empty tensors,
# that is values that are not finite (an infinite dY puts NaN and infinities in other places of ATen's dX than of
# the compute's), rows far from 0 (``ATEN_SPREAD``), and, since ATen forms Y as X rstd - mean rstd and its gradient
# sums dY * X where the compute centres first, magnitudes at which one could overflow where the other does not: the
# guards keep every intermediate of both 16 times below the dtype's largest value, read from the inputs' largest
# magnitudes (``largest``, one pass each; NaN fails every guard) and the rows' statistics (``aten_rows``). They are
# written over torch's tensor methods, with no import of torch.

def largest(t: Any) -> float:
    """The largest magnitude in tensor ``t``: NaN if it holds a NaN (``aminmax`` gives NaN for both), inf if an
    infinity."""
    if t.numel() == 0:
        return 0.0
    low, high = t.aminmax()
    return max(-float(low), float(high))


def one_or_more(v: float) -> float:
    """max(1, v), NaN kept (Python's max would drop it)."""
    return 1.0 if v < 1.0 else v


def most(t: Any) -> float:
    """The largest finite value of tensor ``t``'s dtype (float32 or float64)."""
    return float(np.finfo(np.float32 if t.dtype.itemsize == 4 else np.float64).max)


def rounded(value: float, t: Any) -> float:
    """``value`` rounded to tensor ``t``'s dtype (float32 or float64), as ATen adds its epsilon."""
    return float(np.float32(value)) if t.dtype.itemsize == 4 else float(value)


ATEN_SPREAD = 100.0
"""How far a row's mean may lie from 0 for ATen's layer norm kernels, in |mean| sqrt(var) / (var + eps): its
standard deviations where var >> eps, less where the row is nearly constant. ATen forms the variance by Welford's
updates and dX from X, not X - mean, so both lose about that many ulp where the compute, centring first, keeps its
variance and loses less in dX: float32 rows [64, 256] 100 deviations out parted the variance from numpy's by 2.2e-6
(the derived kernel 1e-7) and dX by 1.3e-6 (6.7e-7); 1000 out by 1.2e-5 and 1.1e-5 (1e-7, 3.1e-6), past the
engines' 1e-5. Y parts as the compute's own rounding does (at 1000 3.4e-5 and 3.5e-5); a constant row of several
values parts in nothing more than its mean's rounding in the compute."""


class AtenRows(NamedTuple):
    """What the guards read from ATen's statistics of the rows (n values each)."""

    fit: bool
    """Every row's mean within ``ATEN_SPREAD`` of 0 and no NaN in X (which makes its row's statistics NaN; an
    infinity makes ``span`` infinite or NaN, which the magnitude guards refuse)."""
    span: float
    """max(1, |mean| + sqrt(n) / rstd), a bound on every |x| (|x - mean| <= sqrt(n var), 1 / rstd = sqrt(var +
    eps))."""
    top: float
    """max(1, rstd)."""

    def output_fits(self, x: Any, scale: Any, bias: Any) -> bool:
        """The forward's guard: every row fit and 16 max|x| max(1, rstd) max(1, |Scale|) + |Bias| (a bound on every
        term of ATen's Y and of the compute's) under X's dtype's largest value; Scale or Bias None where the op has
        none. NaN and infinities fail it."""
        g = 1.0 if scale is None else one_or_more(largest(scale))
        return self.fit and 16 * self.span * self.top * g + (0.0 if bias is None else largest(bias)) <= most(x)

    def gradient_bound(self, count: int, dy_largest: float, scale: Any) -> float:
        """16 count max|dY| max(1, |Scale|) span**2 max(1, rstd)**3: a bound on every term of ATen's gradient and
        of the compute's (``count`` the values a sum runs over; Scale None where the op has none). Products, not
        powers: a float's ** raises OverflowError past the range, where * gives inf."""
        g = 1.0 if scale is None else one_or_more(largest(scale))
        span, top = self.span, self.top
        return 16 * count * dy_largest * g * span * span * top * top * top


def aten_rows(mean: Any, rstd: Any, n: int, eps: float) -> AtenRows:
    """``AtenRows`` from ATen's per-row mean and rstd = 1 / sqrt(var + eps) (``eps`` rounded to their dtype)."""
    away, inverse = mean.abs(), rstd.reciprocal()
    variance = inverse * inverse - eps
    span = float(away.add(inverse, alpha=math.sqrt(n)).max())
    spread = float((away * variance.clamp(min=0).sqrt() * rstd * rstd).max())
    return AtenRows(spread <= ATEN_SPREAD, one_or_more(span), one_or_more(float(rstd.max())))


def layer_norm_aten(ops, x, scale, bias, *, begin_norm_axis, epsilon):
    """``layer_norm`` as ATen's ``native_layer_norm``: Y as it makes it, Mean its own, Variance recovered from its
    rstd = 1 / sqrt(var + eps) as 1 / rstd**2 - eps (ATen keeps no variance; ``torch.var_mean``, a second pass,
    took 2.4 ms over the anchors' transformer's [2048, 256] float32 rows, ``native_layer_norm`` 0.27). None (the
    compute) for a 0-d X, rows of one value, where ``AtenRows.fit`` fails (ATen's Welford moments part from the
    compute's centred ones by the row's spread in ulp), where 16 max|x| max(1, rstd) max(1, |Scale|) + |Bias|
    passes the dtype's largest value (NaN and infinities in X, Scale or Bias among them: it meets any values, and
    its Y is finite wherever it does not decline), and where a row's variance is under epsilon (recovering it from
    var + eps would lose its digits). Inside the transformer's step (two threads) the two layer norms' forward took
    1.06-1.24 ms a step against the compute's 3.0 (2026-12-01)."""
    if x.ndim == 0:
        return None
    begin = normalize_axis(begin_norm_axis, x.ndim)
    lead, norm = tuple(x.shape[:begin]), list(x.shape[begin:])
    n = math.prod(norm)
    if n == 1:
        return None
    y, mean, rstd = ops.native_layer_norm(x, norm, scale, bias, epsilon)
    eps = rounded(epsilon, x)
    if not aten_rows(mean, rstd, n, eps).output_fits(x, scale, bias):
        return None
    variance = rstd.reciprocal().square_().sub_(eps)
    if not float(variance.min()) >= eps:
        return None
    return y, mean.reshape(lead), variance.reshape(lead)


def layer_norm_grad(xp, x, scale, dy, *, begin_norm_axis, epsilon):
    """With xhat = (X - mu) / sqrt(var + epsilon) and c = dY * Scale: dX = (c - mean(c) - xhat mean(c xhat)) /
    sqrt(var + epsilon), dScale = sum(dY xhat), dBias = sum(dY) (sums over the leading dims)."""
    rows, lead, norm = _rows(xp, x, begin_norm_axis)
    _, var, centred = _row_statistics(xp, rows)
    rstd = 1.0 / xp.sqrt(var + epsilon)
    xhat = centred * rstd
    dys = xp.reshape(xp.astype(dy, rows.dtype), rows.shape)
    c = dys if scale is None else dys * xp.reshape(xp.astype(scale, rows.dtype), (1, -1))
    dx = (c - _row_mean(xp, c) - xhat * _row_mean(xp, c * xhat)) * rstd
    return (xp.reshape(dx, x.shape), xp.reshape(xp.sum(dys * xhat, axis=0), norm),
            xp.reshape(xp.sum(dys, axis=0), norm))



# Batch norm's math, once, over ``xp``: X viewed as [N, C, positions], statistics per channel over N and the
# positions, float16 computed in float32 (the engines cast the results to the declared dtypes).
_BATCH_AXES = (0, 2)


def _channels(xp, x):
    """X as [N, C, positions] in its working dtype."""
    work = xp.float32 if x.dtype == xp.float16 else x.dtype
    return xp.reshape(xp.astype(x, work), (x.shape[0], x.shape[1], math.prod(x.shape[2:])))


def _per_channel(xp, v, like):
    """A per-channel vector as [1, C, 1] in ``like``'s dtype."""
    return xp.reshape(xp.astype(v, like.dtype), (1, -1, 1))


def _channel_statistics(xp, x3):
    """Each channel's mean and biased variance (kept as [1, C, 1]) and X centred."""
    mean = _mean_over(xp, x3, _BATCH_AXES)
    centred = x3 - mean
    return mean, _mean_over(xp, centred * centred, _BATCH_AXES), centred


def batch_norm(xp, x, scale, bias, mean, variance, *, momentum, epsilon, is_test, running_variance):
    """Y = (X - mu) / sqrt(var + epsilon) * Scale + Bias per channel, mu and var X's batch statistics (the running
    Mean and Variance with is_test, or for an empty batch, which tells nothing about them and leaves them as
    they were); in training the running ones move toward the batch's by 1 - momentum."""
    x3 = _channels(xp, x)
    running = is_test or math.prod(x.shape) == 0
    if running:
        mu, var = _per_channel(xp, mean, x3), _per_channel(xp, variance, x3)
        centred = x3 - mu
    else:
        mu, var, centred = _channel_statistics(xp, x3)
    y = centred * (_per_channel(xp, scale, x3) / xp.sqrt(var + epsilon)) + _per_channel(xp, bias, x3)
    y = xp.reshape(y, x.shape)
    if running:
        return y, mean, variance
    return (y, *moved_statistics(mean, variance, xp.reshape(mu, (-1,)), xp.reshape(var, (-1,)), x.shape,
                                 momentum=momentum, running_variance=running_variance))


def batch_norm_grad(xp, x, scale, mean, variance, dy, *, epsilon, is_test):
    """With xhat = (X - mu) / sqrt(var + epsilon): dBias = sum(dY), dScale = sum(dY xhat) and dX = Scale /
    sqrt(var + epsilon) (dY - mean(dY) - xhat mean(dY xhat)) (sums and means over N and the positions); with
    is_test mu, var are the running Mean, Variance, constants, and dX = Scale / sqrt(var + epsilon) dY."""
    x3 = _channels(xp, x)
    dy3 = xp.reshape(xp.astype(dy, x3.dtype), x3.shape)
    if is_test:
        var, centred = _per_channel(xp, variance, x3), x3 - _per_channel(xp, mean, x3)
    else:
        _, var, centred = _channel_statistics(xp, x3)
    rstd = 1.0 / xp.sqrt(var + epsilon)
    xhat = centred * rstd
    dbias, dscale = xp.sum(dy3, axis=_BATCH_AXES), xp.sum(dy3 * xhat, axis=_BATCH_AXES)
    gain = _per_channel(xp, scale, x3) * rstd
    if is_test:
        dx = dy3 * gain
    else:  # mean(dY) and mean(dY xhat) are dBias and dScale over the count
        count = x3.shape[0] * x3.shape[2]
        per = 1.0 / count if count else math.nan
        dx = (dy3 - xp.reshape(dbias, (1, -1, 1)) * per - xhat * (xp.reshape(dscale, (1, -1, 1)) * per)) * gain
    return xp.reshape(dx, x.shape), dscale, dbias


def _layer_norm_to_onnx(ctx) -> None:
    """layer_norm -> one LayerNormalization node (opset 17); Scale ones where the op has none (the node needs
    one). Mean and Variance, where read, are ReduceMeans in X's dtype beside it: the node's own Mean and
    InvStdDev are float32 unless ``stash_type`` says otherwise, and InvStdDev is not a variance."""
    g, x, dt, rank = ctx.g, ctx.x("X"), ctx.dtype("X"), ctx.rank("X")
    begin = ctx.attr("begin_norm_axis") % max(rank, 1)
    normalized = list(range(begin, rank))
    if ctx.has("Scale"):
        scale = ctx.x("Scale")
    else:
        dims = g.node("Slice", [g.node("Shape", [x]), g.ints([begin]), g.ints([rank])])
        scale = g.node("Expand", [ctx.scalar(1.0, dt), dims])
    inputs = [x, scale] + ([ctx.x("Bias")] if ctx.has("Bias") else [])
    ctx.emit("LayerNormalization", inputs, slot="Y", axis=begin, epsilon=ctx.attr("epsilon"))
    mean = g.node("ReduceMean", [x], keepdims=1, axes=normalized)
    centred = g.node("Sub", [x, mean])
    variance = g.node("ReduceMean", [g.node("Mul", [centred, centred])], keepdims=1, axes=normalized)
    for slot, value in (("Mean", mean), ("Variance", variance)):
        ctx.set(g.node("Squeeze", [value, g.ints(normalized)], out=ctx.name(slot)) if normalized else value, slot)


def _layer_norm_from_onnx(ctx) -> None:
    """LayerNormalization -> layer_norm. A Scale or B shaped like the normalized dims goes into the op; one that
    only broadcasts to them is applied after it. The InvStdDev output is rebuilt from Variance; statistics are
    computed in X's dtype (``stash_type`` only widens float16, where gradgen's kernel accumulates in float32)."""
    rank, eps = ctx.rank(0), ctx.attr("epsilon", 1e-5)
    begin = ctx.axis(int(ctx.attr("axis", -1)), rank)
    normalized = tuple(ctx.shape(0)[begin:])
    inputs, after = {"X": ctx.x(0)}, []
    for k, slot, op_type in ((1, "Scale", "elementwise_mul"), (2, "Bias", "elementwise_add")):
        if not ctx.has(k):
            continue
        if ctx.shape(k) == normalized and -1 not in normalized:
            inputs[slot] = ctx.x(k)
        else:
            after.append((op_type, ctx.x(k)))
    outs = ctx.op("layer_norm", inputs, {"begin_norm_axis": begin, "epsilon": eps},
                  names={"Y": [ctx.node.output[0]]} if not after else None)
    y = outs["Y"][0]
    for i, (op_type, v) in enumerate(after):
        last = i == len(after) - 1
        y = ctx.out(op_type, {"X": y, "Y": v}) if last else ctx.tmp(op_type, {"X": y, "Y": v})
    ctx.bind(0, y)
    kept = {"axes": list(range(begin, rank))}
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        ctx.bind(1, ctx.tmp("unsqueeze", {"X": outs["Mean"][0]}, kept))
    if len(ctx.node.output) > 2 and ctx.node.output[2]:
        shifted = ctx.tmp("scale", {"X": outs["Variance"][0]}, {"bias": eps})
        ctx.bind(2, ctx.tmp("unsqueeze", {"X": ctx.tmp("pow", {"X": shifted}, {"factor": -0.5})}, kept))


SCHEMAS = (
    schema("dropout", ["X"], ["Out", "Mask"], _dropout,
           {"p": Attr("float", 0.5), "is_test": Attr("bool", False), "seed": Attr("int", 0)},
           doc="Zero each element with probability p and scale the rest by 1 / (1 - p) (identity when is_test); "
               "Mask holds the factor each element was multiplied by. Samples come from a PCG64 stream seeded "
               "with `seed` that advances with every run of one compiled plan.", stateful=True,
           dtypes={"X": FLOAT_DTYPES}),
    schema("lookup_table", ["W", "Ids"], ["Out"], _lookup_table,
           doc="The rows of table W at the integers of Ids: an embedding lookup.",
           dtypes={"W": FLOAT_DTYPES, "Ids": INT_DTYPES}, compute=lookup_table),
    schema("batch_norm", ["X", "Scale", "Bias", "Mean", "Variance"], ["Y", "MeanOut", "VarianceOut"], _batch_norm,
           {"momentum": Attr("float", 0.9), "epsilon": Attr("float", 1e-5), "is_test": Attr("bool", False),
            "running_variance": Attr("str", "population")},
           doc="Normalize each channel (axis 1) by the batch's statistics, then scale and shift; in training "
               "the running Mean/Variance (written in place through MeanOut/VarianceOut) move toward them by "
               "1 - momentum: toward the batch's population variance, or with running_variance='unbiased' "
               "its unbiased one, n / (n - 1) times it (n values per channel; PyTorch's rule, n = 1 a run-time "
               "error). With is_test, the running statistics normalize instead. An empty batch leaves them as "
               "they were.",
           dtypes={"X": FLOAT_DTYPES, "Scale": "X", "Bias": "X", "Mean": "X", "Variance": "X"}, compute=batch_norm),
    schema("batch_norm_grad", ["X", "Scale", Slot("Mean", optional=True), Slot("Variance", optional=True), "Y@GRAD"],
           ["X@GRAD", "Scale@GRAD", "Bias@GRAD"], _batch_norm_grad, {"epsilon": Attr("float", 1e-5), "is_test": Attr("bool", False)},
           doc="batch_norm's gradients in one pass over X: with xhat = (X - mu) / sqrt(var + epsilon), "
               "Bias@GRAD = sum(Y@GRAD), Scale@GRAD = sum(Y@GRAD * xhat) (sums over every axis but 1) and "
               "X@GRAD = Scale / sqrt(var + epsilon) * (Y@GRAD - mean(Y@GRAD) - xhat * mean(Y@GRAD * xhat)). "
               "In training mu, var are X's batch statistics (Mean, Variance are left out); with is_test they "
               "are the running Mean, Variance (required), constants, and X@GRAD = Scale / sqrt(var + epsilon) "
               "* Y@GRAD.",
           dtypes={"X": FLOAT_DTYPES, "Scale": "X", "Mean": "X", "Variance": "X", "Y@GRAD": "X"},
           compute=batch_norm_grad),
    schema("layer_norm", ["X", Slot("Scale", optional=True), Slot("Bias", optional=True)],
           ["Y", "Mean", "Variance"], _layer_norm, _NORM_ATTRS,
           doc="Normalize X over its dims from begin_norm_axis on, in one pass: Y = (X - Mean) / sqrt(Variance + "
               "epsilon) * Scale + Bias, Scale and Bias (optional) shaped like those dims. Mean and Variance "
               "(the biased one) are per leading index, shaped like X's dims before begin_norm_axis.",
           dtypes={"X": FLOAT_DTYPES, "Scale": "X", "Bias": "X"}, compute=layer_norm, aten=layer_norm_aten,
           aten_any_values=True, aten_finite_out=True,
           onnx_mapping=OnnxMapping("LayerNormalization", _layer_norm_to_onnx, _layer_norm_from_onnx)),
    schema("layer_norm_grad", ["X", Slot("Scale", optional=True), "Y@GRAD"],
           ["X@GRAD", Slot("Scale@GRAD", optional=True), Slot("Bias@GRAD", optional=True)], _layer_norm_grad,
           _NORM_ATTRS,
           doc="layer_norm's gradients in one pass: with X's statistics mu, var over the normalized dims "
               "(recomputed, so the op is a function of its inputs alone), xhat = (X - mu) / sqrt(var + epsilon) "
               "and c = Y@GRAD * Scale, X@GRAD = (c - mean(c) - xhat * mean(c * xhat)) / sqrt(var + epsilon), "
               "Scale@GRAD = sum(Y@GRAD * xhat), Bias@GRAD = sum(Y@GRAD) (sums over the leading dims).",
           dtypes={"X": FLOAT_DTYPES, "Scale": "X", "Y@GRAD": "X"}, compute=layer_norm_grad),
)


__all__ = ["ATEN_SPREAD", "AtenRows", "SCHEMAS", "RUNNING_VARIANCES", "aten_rows", "batch_norm", "batch_norm_grad",
           "largest", "layer_norm", "layer_norm_aten", "layer_norm_grad", "lookup_table", "most", "moved_statistics",
           "one_or_more", "rounded", "running_variance_factor"]
