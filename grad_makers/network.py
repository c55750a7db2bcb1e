"""Gradients of dropout, lookup_table and batch_norm, written with ordinary ops."""
from __future__ import annotations

from .base import grad_maker, only_grad, op


@grad_maker("dropout", emits=("elementwise_mul",))
def dropout_grad(fwd, ctx):
    """dX = dOut * Mask: the forward's mask is reused, never resampled."""
    return only_grad(ctx, "X", lambda dx: [
        op("elementwise_mul", {"X": ctx.output_grad("Out")[0], "Y": ctx.output("Mask")[0]}, {"Out": dx})])


@grad_maker("lookup_table", emits=("gather_grad",))
def lookup_table_grad(fwd, ctx):
    """Rows of dW get the gradients of every lookup of them (repeated ids accumulate)."""
    return only_grad(ctx, "W", lambda dw: [
        op("gather_grad", {"X": ctx.input("W")[0], "Index": ctx.input("Ids")[0], "Out@GRAD": ctx.output_grad("Out")[0]},
           {"X@GRAD": dw}, axis=0)])


@grad_maker("batch_norm", emits=("unsqueeze", "reduce_mean", "reduce_sum", "elementwise_sub", "elementwise_mul",
                                 "square", "scale", "pow"))
def batch_norm_grad(fwd, ctx):
    """Recompute the normalization from X with ordinary ops, then the textbook batch-norm backward.

    Training: dX = scale * rstd * (dY - mean(dY) - xhat * mean(dY * xhat)); inference
    uses the running statistics, so dX = scale * rstd * dY. dScale = sum(dY * xhat),
    dBias = sum(dY), both over every axis but the channel axis 1.
    """
    x, scale, dy = ctx.input("X")[0], ctx.input("Scale")[0], ctx.output_grad("Y")[0]
    rank = len(ctx.var_type(x).shape)
    axes = [0] + list(range(2, rank))
    t = ctx.tmp
    (dx,) = ctx.input_grad("X")
    (dscale,) = ctx.input_grad("Scale")
    (dbias,) = ctx.input_grad("Bias")
    eps = fwd.attr("epsilon")
    descs = []
    if fwd.attr("is_test"):
        mean, var = t("mean"), t("var")
        descs += [op("unsqueeze", {"X": ctx.input("Mean")[0]}, {"Out": mean}, axes=[0] + list(range(2, rank))),
                  op("unsqueeze", {"X": ctx.input("Variance")[0]}, {"Out": var}, axes=[0] + list(range(2, rank)))]
    else:
        mean, var, sq = t("mean"), t("var"), t("sq")
        centred_for_var = t("centred")
        descs += [op("reduce_mean", {"X": x}, {"Out": mean}, dim=axes, keep_dim=True),
                  op("elementwise_sub", {"X": x, "Y": mean}, {"Out": centred_for_var}),
                  op("square", {"X": centred_for_var}, {"Out": sq}),
                  op("reduce_mean", {"X": sq}, {"Out": var}, dim=axes, keep_dim=True)]
    var_eps, rstd, centred, xhat = t("var_eps"), t("rstd"), t("centred_x"), t("xhat")
    descs += [op("scale", {"X": var}, {"Out": var_eps}, bias=eps),
              op("pow", {"X": var_eps}, {"Out": rstd}, factor=-0.5),
              op("elementwise_sub", {"X": x, "Y": mean}, {"Out": centred}),
              op("elementwise_mul", {"X": centred, "Y": rstd}, {"Out": xhat})]
    if dbias is not None:
        descs.append(op("reduce_sum", {"X": dy}, {"Out": dbias}, dim=axes))
    if dscale is not None:
        prod = t("dy_xhat")
        descs += [op("elementwise_mul", {"X": dy, "Y": xhat}, {"Out": prod}),
                  op("reduce_sum", {"X": prod}, {"Out": dscale}, dim=axes)]
    if dx is not None:
        scale_b, gain = t("scale_b"), t("gain")
        descs += [op("unsqueeze", {"X": scale}, {"Out": scale_b}, axes=[0] + list(range(2, rank))),
                  op("elementwise_mul", {"X": scale_b, "Y": rstd}, {"Out": gain})]
        if fwd.attr("is_test"):
            descs.append(op("elementwise_mul", {"X": dy, "Y": gain}, {"Out": dx}))
        else:
            m1, prod2, m2, proj, d1, d2 = (t(n) for n in ("mean_dy", "dy_xhat2", "mean_dy_xhat", "proj", "d1", "d2"))
            descs += [op("reduce_mean", {"X": dy}, {"Out": m1}, dim=axes, keep_dim=True),
                      op("elementwise_mul", {"X": dy, "Y": xhat}, {"Out": prod2}),
                      op("reduce_mean", {"X": prod2}, {"Out": m2}, dim=axes, keep_dim=True),
                      op("elementwise_mul", {"X": xhat, "Y": m2}, {"Out": proj}),
                      op("elementwise_sub", {"X": dy, "Y": m1}, {"Out": d1}),
                      op("elementwise_sub", {"X": d1, "Y": proj}, {"Out": d2}),
                      op("elementwise_mul", {"X": d2, "Y": gain}, {"Out": dx})]
    return descs
