"""Lowerings of softmax and the losses, the fused activation grad ops, dropout, batch norm and the optimizers.

The fused grad ops become the few standard ops their formulas need, so a backward program is an
ordinary ONNX graph.
"""
from __future__ import annotations


import numpy as np

from .context import Lowering
from .graph import fill_value, onnx_dtype
from .lower_math import log1p, mean_node, nan_along, reduce_node, rounded_once

__all__ = ["LOWERINGS", "OWN_EXPORTS"]


def _axis(ctx: Lowering, slot: str) -> int:
    return ctx.attr("axis") % max(ctx.rank(slot), 1)


def softmax(ctx):
    ctx.emit("Softmax", [ctx.x()], axis=_axis(ctx, "X"))


def log_softmax(ctx):
    ctx.finish(_log_softmax(ctx, "X", _axis(ctx, "X")))


def _log_softmax(ctx: Lowering, slot: str, axis: int) -> str:
    """ONNX's LogSoftmax, NaN along a row that holds a NaN or whose max is +inf, as the compute gives (inf - inf
    there), where ONNX Runtime gives NaN at the infinity and -inf elsewhere, and in float64 finite values beside a
    NaN that is not first (46.05 for [0.1, nan, nan, 0.2])."""
    g, x = ctx.g, ctx.x(slot)
    log_p = g.node("LogSoftmax", [x], axis=axis)
    if ctx.var(slot).shape[axis] == 0:  # an empty row: nothing to take a max of
        return log_p
    dt = ctx.dtype(slot)
    infinite = g.node("Equal", [reduce_node(ctx, "ReduceMax", x, [axis], True), ctx.scalar(np.inf, dt)])
    bad = g.node("Or", [infinite, nan_along(ctx, x, dt, [axis], True)])
    return g.node("Where", [bad, ctx.scalar(np.nan, dt), log_p])


def _hard_index(ctx: Lowering, x_slot: str, axis: int) -> tuple[str, str]:
    """Hard labels as int64 with the rank of X (they may come without the class axis), ``ignore_index`` read as
    class 0, and the mask of the kept ones (``program/ops/nn.hard_labels``)."""
    g, label = ctx.g, ctx.x("Label")
    if ctx.rank("Label") < ctx.rank(x_slot):
        label = g.node("Unsqueeze", [label, g.ints([axis])])
    index = g.node("Cast", [label], to=onnx_dtype("int64"))
    kept = g.node("Not", [g.node("Equal", [index, g.const(np.int64(ctx.attr("ignore_index")))])])
    return g.node("Where", [kept, index, g.const(np.int64(0))]), kept


def pick(ctx: Lowering, values: str, x_slot: str, axis: int) -> tuple[str, str]:
    """values[..., label, ...] along ``axis`` (an ignored label picks class 0) and the mask of the kept labels: a
    one-hot mask summed when the class count is known (ops any importer reads back), else ``GatherElements``."""
    g, classes = ctx.g, ctx.var(x_slot).shape[axis]
    index, kept = _hard_index(ctx, x_slot, axis)
    if classes < 0:
        return g.node("GatherElements", [values, index], axis=axis), kept
    shape = [1] * ctx.rank(x_slot)
    shape[axis] = classes
    hot = g.node("Equal", [index, g.const(np.arange(classes, dtype=np.int64).reshape(shape))])
    masked = g.node("Where", [hot, values, ctx.scalar(0.0, ctx.dtype(x_slot))])
    return reduce_node(ctx, "ReduceSum", masked, [axis], True), kept


def cross_entropy(ctx):
    g, x = ctx.g, ctx.x("X")
    if ctx.attr("soft_label"):
        picked = reduce_node(ctx, "ReduceSum", g.node("Mul", [ctx.x("Label"), g.node("Log", [x])]),
                             [ctx.rank("X") - 1], True)
        return ctx.emit("Neg", [picked])
    picked, kept = pick(ctx, x, "X", ctx.rank("X") - 1)
    ctx.emit("Where", [kept, g.node("Neg", [g.node("Log", [picked])]), ctx.scalar(0.0, ctx.dtype("X"))])


def softmax_with_cross_entropy(ctx):
    g, axis = ctx.g, _axis(ctx, "Logits")
    log_p = _log_softmax(ctx, "Logits", axis)
    ctx.emit("Exp", [log_p], slot="Softmax")
    if ctx.attr("soft_label"):
        picked = reduce_node(ctx, "ReduceSum", g.node("Mul", [ctx.x("Label"), log_p]), [axis], True)
        return ctx.emit("Neg", [picked], slot="Loss")
    picked, kept = pick(ctx, log_p, "Logits", axis)
    ctx.emit("Where", [kept, g.node("Neg", [picked]), ctx.scalar(0.0, ctx.dtype("Logits"))], slot="Loss")


def sigmoid_cross_entropy_with_logits(ctx):
    # max(x, 0) - x * z + log1p(exp(-|x|)), as the kernel computes it
    g, x, dt = ctx.g, ctx.x("X"), ctx.dtype("X")
    e = g.node("Exp", [g.node("Neg", [g.node("Abs", [x])])])
    ctx.emit("Add", [g.node("Sub", [g.node("Relu", [x]), g.node("Mul", [x, ctx.x("Label")])]), log1p(ctx, e, dt)])
















def softmax_grad(ctx):
    # Out * (Out@GRAD - sum(Out@GRAD * Out, axis))
    g, out, dout = ctx.g, ctx.x("Out"), ctx.x("Out@GRAD")
    if ctx.rank("Out") == 0:
        return ctx.emit("Sub", [dout, dout], slot="X@GRAD")
    dots = reduce_node(ctx, "ReduceSum", g.node("Mul", [dout, out]), [_axis(ctx, "Out")], True)
    ctx.emit("Mul", [out, g.node("Sub", [dout, dots])], slot="X@GRAD")


def dropout(ctx):
    # only the identity form is exportable (see LIMITS): Out = X, Mask = ones
    ctx.finish(ctx.x())
    ctx.emit("ConstantOfShape", [ctx.g.node("Shape", [ctx.x()])], slot="Mask",
             value=fill_value(1.0, ctx.dtype()))


def _bessel(ctx, size: str) -> str:
    """n / (n - 1), n = X's values per channel (``size``, X's Size, over Scale's), in X's dtype: what turns the
    batch's population variance into the unbiased one. ONNX cannot raise, so where gradgen's kernels refuse
    n = 1 the exported model's running variance becomes NaN (0 * inf)."""
    g, dt = ctx.g, ctx.dtype("X")
    count = g.node("Div", [g.node("Cast", [size], to=onnx_dtype(dt)),
                           g.node("Cast", [g.node("Size", [ctx.x("Scale")])], to=onnx_dtype(dt))])
    return g.node("Div", [count, g.node("Sub", [count, ctx.scalar(1.0, dt)])])


def batch_norm(ctx):
    g, x, dt, rank = ctx.g, ctx.x("X"), ctx.dtype("X"), ctx.rank("X")
    shape = g.ints([1, -1] + [1] * (rank - 2))
    axes = [0] + list(range(2, rank))
    mean, var = ctx.x("Mean"), ctx.x("Variance")
    if ctx.attr("is_test"):
        mu, v = mean, var
    else:
        mu = mean_node(ctx, x, dt, axes, False)  # NaN over an empty batch, as the engines' statistics
        d = g.node("Sub", [x, g.node("Reshape", [mu, shape])])
        v = mean_node(ctx, g.node("Mul", [d, d]), dt, axes, False)
    centered = g.node("Sub", [x, g.node("Reshape", [mu, shape])])
    std = g.node("Sqrt", [g.node("Add", [g.node("Reshape", [v, shape]), ctx.scalar(ctx.attr("epsilon"), dt)])])
    y = g.node("Mul", [g.node("Div", [centered, std]), g.node("Reshape", [ctx.x("Scale"), shape])])
    ctx.emit("Add", [y, g.node("Reshape", [ctx.x("Bias"), shape])], slot="Y")
    if ctx.attr("is_test"):
        ctx.finish(mean, "MeanOut")
        return ctx.finish(var, "VarianceOut")
    m, odt, size = ctx.attr("momentum"), ctx.dtype("Mean"), g.node("Size", [x])
    if ctx.attr("running_variance") == "unbiased":
        v = g.node("Mul", [v, _bessel(ctx, size)])
    seen = g.node("Greater", [size, g.const(np.int64(0))])  # an empty batch leaves them as they were
    for slot, old, new in (("MeanOut", mean, mu), ("VarianceOut", var, v)):
        kept, added = g.node("Mul", [ctx.scalar(m, odt), old]), g.node("Mul", [ctx.scalar(1.0 - m, odt), new])
        moved = g.node("Add", [kept, added])
        ctx.emit("Where", [seen, moved, old], slot=slot)


def sgd(ctx):
    g = ctx.g
    ctx.emit("Sub", [ctx.x("Param"), g.node("Mul", [ctx.to_scalar(ctx.x("LearningRate")), ctx.x("Grad")])],
             slot="ParamOut")


def momentum(ctx):
    g, dt, mu = ctx.g, ctx.dtype("Param"), ctx.attr("mu")
    grad, lr = ctx.x("Grad"), ctx.to_scalar(ctx.x("LearningRate"))
    v = ctx.emit("Add", [g.node("Mul", [ctx.scalar(mu, dt), ctx.x("Velocity")]), grad], slot="VelocityOut")
    step = g.node("Add", [grad, g.node("Mul", [ctx.scalar(mu, dt), v])]) if ctx.attr("use_nesterov") else v
    ctx.emit("Sub", [ctx.x("Param"), g.node("Mul", [lr, step])], slot="ParamOut")


def _adam_moments(ctx) -> tuple[str, str, str, str]:
    """Moment1Out, Moment2Out and the beta powers' outputs, as adam, adamw and lamb all update them; returns the
    new moments and the step's beta powers (the inputs, binding an output rebinding the var's name; rank 0, so
    that a [1] beta power leaves a rank-0 Param's step rank 0)."""
    g, dt = ctx.g, ctx.dtype("Param")
    b1, b2, grad, b1p, b2p = ctx.attr("beta1"), ctx.attr("beta2"), ctx.x("Grad"), ctx.x("Beta1Pow"), ctx.x("Beta2Pow")
    c = lambda v: ctx.scalar(v, dt)  # noqa: E731
    m1 = ctx.emit("Add", [g.node("Mul", [c(b1), ctx.x("Moment1")]), g.node("Mul", [c(1.0 - b1), grad])],
                  slot="Moment1Out")
    m2 = ctx.emit("Add", [g.node("Mul", [c(b2), ctx.x("Moment2")]),
                          g.node("Mul", [g.node("Mul", [c(1.0 - b2), grad]), grad])], slot="Moment2Out")
    ctx.emit("Mul", [b1p, c(b1)], slot="Beta1PowOut")
    ctx.emit("Mul", [b2p, c(b2)], slot="Beta2PowOut")
    return m1, m2, ctx.to_scalar(b1p), ctx.to_scalar(b2p)


def _adam_step(ctx, param: str) -> None:
    """ParamOut = param - lr_t m1 / (sqrt(m2) + eps sqrt(1 - b2^t)), lr_t = lr sqrt(1 - b2^t) / (1 - b1^t)."""
    g, dt = ctx.g, ctx.dtype("Param")
    m1, m2, b1p, b2p = _adam_moments(ctx)
    c = lambda v: ctx.scalar(v, dt)  # noqa: E731
    root = g.node("Sqrt", [g.node("Sub", [c(1.0), b2p])])
    lr_t = g.node("Div", [g.node("Mul", [ctx.to_scalar(ctx.x("LearningRate")), root]), g.node("Sub", [c(1.0), b1p])])
    denom = g.node("Add", [g.node("Sqrt", [m2]), g.node("Mul", [c(ctx.attr("epsilon")), root])])
    ctx.emit("Sub", [param, g.node("Div", [g.node("Mul", [lr_t, m1]), denom])], slot="ParamOut")


def adam(ctx):
    _adam_step(ctx, ctx.x("Param"))


def adamw(ctx):
    g, lr = ctx.g, ctx.to_scalar(ctx.x("LearningRate"))
    shrink = g.node("Sub", [ctx.scalar(1.0, ctx.dtype("Param")),
                            g.node("Mul", [lr, ctx.scalar(ctx.attr("coeff"), ctx.dtype("Param"))])])
    _adam_step(ctx, g.node("Mul", [ctx.x("Param"), shrink]))


def lamb(ctx):
    g, dt, p = ctx.g, ctx.dtype("Param"), ctx.x("Param")
    c = lambda v: ctx.scalar(v, dt)  # noqa: E731
    m1, m2, b1p, b2p = _adam_moments(ctx)
    m1_hat = g.node("Div", [m1, g.node("Sub", [c(1.0), b1p])])
    m2_hat = g.node("Div", [m2, g.node("Sub", [c(1.0), b2p])])
    r = g.node("Add", [g.node("Div", [m1_hat, g.node("Add", [g.node("Sqrt", [m2_hat]), c(ctx.attr("epsilon"))])]),
                       g.node("Mul", [c(ctx.attr("weight_decay")), p])])
    p_norm, r_norm = (g.node("Sqrt", [reduce_node(ctx, "ReduceSumSquare", v, None, False)]) for v in (p, r))
    both = g.node("And", [g.node("Greater", [p_norm, c(0.0)]), g.node("Greater", [r_norm, c(0.0)])])
    ratio = g.node("Where", [both, g.node("Div", [p_norm, r_norm]), c(1.0)])
    step = g.node("Mul", [g.node("Mul", [ctx.to_scalar(ctx.x("LearningRate")), ratio]), r])
    ctx.emit("Sub", [p, step], slot="ParamOut")


def rmsprop(ctx):
    g, dt, grad = ctx.g, ctx.dtype("Param"), ctx.x("Grad")
    rho, mu = ctx.attr("rho"), ctx.attr("momentum")
    c = lambda v: ctx.scalar(v, dt)  # noqa: E731
    ms = ctx.emit("Add", [g.node("Mul", [c(rho), ctx.x("MeanSquare")]),
                          g.node("Mul", [g.node("Mul", [c(1.0 - rho), grad]), grad])], slot="MeanSquareOut")
    if ctx.attr("centered"):
        mg = ctx.emit("Add", [g.node("Mul", [c(rho), ctx.x("MeanGrad")]), g.node("Mul", [c(1.0 - rho), grad])],
                      slot="MeanGradOut")
        ms = g.node("Sub", [ms, g.node("Mul", [mg, mg])])
    else:
        ctx.finish(ctx.x("MeanGrad"), "MeanGradOut")
    avg = g.node("Add", [g.node("Sqrt", [ms]), c(ctx.attr("epsilon"))])
    moment = ctx.emit("Add", [g.node("Mul", [c(mu), ctx.x("Moment")]), g.node("Div", [grad, avg])], slot="MomentOut")
    ctx.emit("Sub", [ctx.x("Param"), g.node("Mul", [ctx.to_scalar(ctx.x("LearningRate")), moment])], slot="ParamOut")


def adagrad(ctx):
    g, grad = ctx.g, ctx.x("Grad")
    moment = ctx.emit("Add", [ctx.x("Moment"), g.node("Mul", [grad, grad])], slot="MomentOut")
    root = g.node("Add", [g.node("Sqrt", [moment]), ctx.scalar(ctx.attr("epsilon"), ctx.dtype("Param"))])
    step = g.node("Div", [g.node("Mul", [ctx.to_scalar(ctx.x("LearningRate")), grad]), root])
    ctx.emit("Sub", [ctx.x("Param"), step], slot="ParamOut")


def global_norm_of(ctx: Lowering) -> str:
    """sqrt of the sum of squares of every X, accumulated in float64 as the kernel does."""
    g, total = ctx.g, None
    for x in ctx.xs("X"):
        part = g.node("ReduceSumSquare", [g.node("Cast", [x], to=onnx_dtype("float64"))], keepdims=0)
        total = part if total is None else g.node("Add", [total, part])
    return g.node("Sqrt", [total])


def global_norm(ctx):
    dt = ctx.dtype("X")
    ctx.emit("Cast", [rounded_once(ctx, global_norm_of(ctx), dt)], to=onnx_dtype(dt))


def clip_by_global_norm(ctx):
    """Each X times the scale in float64, rounded once to its dtype, as the engines compute it."""
    g, max_norm = ctx.g, ctx.attr("max_norm")
    norm = global_norm_of(ctx)
    scale = g.node("Div", [ctx.scalar(max_norm, "float64"), g.node("Max", [norm, ctx.scalar(max_norm, "float64")])])
    for k, x in enumerate(ctx.xs("X")):
        dt = ctx.var("X", k).dtype
        scaled = g.node("Mul", [g.node("Cast", [x], to=onnx_dtype("float64")), scale])
        ctx.emit("Cast", [rounded_once(ctx, scaled, dt)], k=k, to=onnx_dtype(dt))


LOWERINGS = {
    "softmax": softmax, "log_softmax": log_softmax, "cross_entropy": cross_entropy,
    "softmax_with_cross_entropy": softmax_with_cross_entropy,
    "sigmoid_cross_entropy_with_logits": sigmoid_cross_entropy_with_logits,
    "softmax_grad": softmax_grad, "dropout": dropout,
    "batch_norm": batch_norm,
    "sgd": sgd, "momentum": momentum, "adam": adam, "adamw": adamw, "lamb": lamb, "rmsprop": rmsprop,
    "adagrad": adagrad, "global_norm": global_norm,
    "clip_by_global_norm": clip_by_global_norm,
}
"""gradgen op type -> lowering."""

OWN_EXPORTS = {"softmax": "one Softmax node (opset 13 on: along axis)",
               "log_softmax": "one LogSoftmax node (opset 13 on: along axis), NaN where a row holds a NaN or its max "
                              "is +inf (ONNX Runtime's differ there)",
               "cross_entropy": "a hard label's range check is an xp.check, which no ONNX node raises; the labels "
                                "picked by a one-hot mask (GatherElements where the classes are known only at run "
                                "time), an ignored one giving 0",
               "softmax_with_cross_entropy": "two outputs (the traced export takes one); the hard labels picked by "
                                             "GatherElements, the check of their range left out (ONNX has no "
                                             "run-time error)",
               "sigmoid_cross_entropy_with_logits": "the compute checks the label's run-time shape, which an exported "
                                                    "graph cannot (ONNX would broadcast); the same formula here",
               "softmax_grad": "a sum along an axis, which the ONNX xp (lower_derived) does not trace: one ReduceSum",
               "sgd": "its learning rate is a one-element tensor read as a scalar (ctx.to_scalar), which the ONNX "
                      "xp does not trace", "momentum": "two outputs (the derived export takes one)",
               **{t: f"{n} outputs (the derived export takes one)"
                  for t, n in (("adam", "five"), ("adamw", "five"), ("lamb", "five"), ("rmsprop", "four"),
                               ("adagrad", "two"))},
               "batch_norm": "three outputs (the derived export takes one), and an empty batch, which the compute "
                             "tells by X's static shape, is a Where over X's run-time Size here",
               "global_norm": "a sum of every element (xp.sum), which the ONNX xp does not trace: one "
                              "ReduceSumSquare of each X in float64",
               "clip_by_global_norm": "one output per X (the derived export writes one var)"}
"""Ops with a formula (``OpSchema.compute``) exported here rather than from it (``lower_derived``), and why."""


def _dropout_limit(op) -> str | None:
    if op.attr("is_test") or op.attr("p") == 0.0:
        return None
    return ("training-mode dropout draws its masks from numpy's PCG64 stream, which no ONNX op reproduces "
            "(export the program from clone(for_test=True))")


LIMITS = {"dropout": _dropout_limit}
"""op type -> check returning why this op cannot be exported, or None."""
