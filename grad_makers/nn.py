"""Gradients of softmax, log-softmax and the cross-entropy losses, written with ordinary ops."""
from __future__ import annotations

from gradgen.program.shapes import normalize_axis

from .base import OpDesc, grad_maker, op


def _axis(fwd, ctx, name: str) -> int:
    return normalize_axis(fwd.attr("axis"), len(ctx.var_type(name).shape))


def _softmax_backward(ctx, out: str, dout: str, axis: int, dx: str) -> list[OpDesc]:
    """dx = out * (dout - sum(dout * out, axis))."""
    prod, total, diff = ctx.tmp("prod"), ctx.tmp("total"), ctx.tmp("diff")
    return [op("elementwise_mul", {"X": dout, "Y": out}, {"Out": prod}),
            op("reduce_sum", {"X": prod}, {"Out": total}, dim=[axis], keep_dim=True),
            op("elementwise_sub", {"X": dout, "Y": total}, {"Out": diff}),
            op("elementwise_mul", {"X": out, "Y": diff}, {"Out": dx})]


@grad_maker("softmax", emits=("elementwise_mul", "reduce_sum", "elementwise_sub"))
def softmax_grad(fwd, ctx):
    (dx,) = ctx.input_grad("X")
    if dx is None:
        return []
    out = ctx.output("Out")[0]
    return _softmax_backward(ctx, out, ctx.output_grad("Out")[0], _axis(fwd, ctx, out), dx)


@grad_maker("log_softmax", emits=("reduce_sum", "exp", "elementwise_mul", "elementwise_sub"))
def log_softmax_grad(fwd, ctx):
    """dx = dout - softmax * sum(dout, axis), with softmax = exp(out)."""
    (dx,) = ctx.input_grad("X")
    if dx is None:
        return []
    out, dout = ctx.output("Out")[0], ctx.output_grad("Out")[0]
    total, prob, prod = ctx.tmp("total"), ctx.tmp("prob"), ctx.tmp("prod")
    return [op("reduce_sum", {"X": dout}, {"Out": total}, dim=[_axis(fwd, ctx, out)], keep_dim=True),
            op("exp", {"X": out}, {"Out": prob}),
            op("elementwise_mul", {"X": prob, "Y": total}, {"Out": prod}),
            op("elementwise_sub", {"X": dout, "Y": prod}, {"Out": dx})]


def _one_hot_labels(ctx, label: str, like: str) -> tuple[list[OpDesc], str]:
    """Hard int labels (shape [..., 1] or [...]) as a float one-hot tensor shaped like ``like``."""
    like_t, label_t = ctx.var_type(like), ctx.var_type(label)
    descs = []
    if len(label_t.shape) == len(like_t.shape):
        squeezed = ctx.tmp("label")
        descs.append(op("squeeze", {"X": label}, {"Out": squeezed}, axes=[-1]))
        label = squeezed
    hot = ctx.tmp("one_hot")
    descs += [op("one_hot", {"X": label}, {"Out": hot}, depth=like_t.shape[-1], dtype=like_t.dtype)]
    return descs, hot


@grad_maker("cross_entropy", emits=("squeeze", "one_hot", "elementwise_div", "elementwise_mul", "scale", "log"))
def cross_entropy_grad(fwd, ctx):
    """Out = -sum(label * log(X)) over the last axis: dX = -dout * label / X; soft labels get -dout * log(X)."""
    x, label, dout = ctx.input("X")[0], ctx.input("Label")[0], ctx.output_grad("Out")[0]
    (dx,) = ctx.input_grad("X")
    (dlabel,) = ctx.input_grad("Label")
    descs = []
    if dx is not None:
        if fwd.attr("soft_label"):
            target = label
        else:
            hot_descs, target = _one_hot_labels(ctx, label, x)
            descs += hot_descs
        ratio, prod = ctx.tmp("ratio"), ctx.tmp("prod")
        descs += [op("elementwise_div", {"X": target, "Y": x}, {"Out": ratio}),
                  op("elementwise_mul", {"X": ratio, "Y": dout}, {"Out": prod}),
                  op("scale", {"X": prod}, {"Out": dx}, scale=-1.0)]
    if dlabel is not None and fwd.attr("soft_label"):
        lg, prod = ctx.tmp("log_x"), ctx.tmp("prod")
        descs += [op("log", {"X": x}, {"Out": lg}), op("elementwise_mul", {"X": lg, "Y": dout}, {"Out": prod}),
                  op("scale", {"X": prod}, {"Out": dlabel}, scale=-1.0)]
    return descs


@grad_maker("softmax_with_cross_entropy", emits=("squeeze", "one_hot", "elementwise_sub", "elementwise_mul",
                                                 "reduce_sum", "elementwise_add", "log_softmax", "scale"))
def softmax_with_cross_entropy_grad(fwd, ctx):
    """dLogits = (softmax - label) * dLoss, plus softmax's own backward if its output was used."""
    logits, label = ctx.input("Logits")[0], ctx.input("Label")[0]
    softmax, dloss = ctx.output("Softmax")[0], ctx.output_grad("Loss")[0]
    axis = _axis(fwd, ctx, logits)
    (dlogits,) = ctx.input_grad("Logits")
    (dlabel,) = ctx.input_grad("Label")
    descs = []
    if dlogits is not None:
        if fwd.attr("soft_label"):
            target = label
        else:
            hot_descs, target = _one_hot_labels(ctx, label, logits)
            descs += hot_descs
        diff = ctx.tmp("diff")
        from_loss = ctx.tmp("from_loss") if ctx.has_output_grad("Softmax") else dlogits
        descs += [op("elementwise_sub", {"X": softmax, "Y": target}, {"Out": diff}),
                  op("elementwise_mul", {"X": diff, "Y": dloss}, {"Out": from_loss})]
        if ctx.has_output_grad("Softmax"):
            from_softmax = ctx.tmp("from_softmax")
            descs += _softmax_backward(ctx, softmax, ctx.output_grad("Softmax")[0], axis, from_softmax)
            descs.append(op("elementwise_add", {"X": from_loss, "Y": from_softmax}, {"Out": dlogits}))
    if dlabel is not None and fwd.attr("soft_label"):
        lg, prod = ctx.tmp("log_softmax"), ctx.tmp("prod")
        descs += [op("log_softmax", {"X": logits}, {"Out": lg}, axis=axis),
                  op("elementwise_mul", {"X": lg, "Y": dloss}, {"Out": prod}),
                  op("scale", {"X": prod}, {"Out": dlabel}, scale=-1.0)]
    return descs


@grad_maker("sigmoid_cross_entropy_with_logits", emits=("sigmoid", "elementwise_sub", "elementwise_mul", "scale"))
def sigmoid_cross_entropy_grad(fwd, ctx):
    """Out = max(x, 0) - x * z + log(1 + exp(-|x|)): dX = (sigmoid(x) - z) * dout, dZ = -x * dout."""
    x, z, dout = ctx.input("X")[0], ctx.input("Label")[0], ctx.output_grad("Out")[0]
    (dx,) = ctx.input_grad("X")
    (dz,) = ctx.input_grad("Label")
    descs = []
    if dx is not None:
        s, diff = ctx.tmp("sigmoid"), ctx.tmp("diff")
        descs += [op("sigmoid", {"X": x}, {"Out": s}), op("elementwise_sub", {"X": s, "Y": z}, {"Out": diff}),
                  op("elementwise_mul", {"X": diff, "Y": dout}, {"Out": dx})]
    if dz is not None:
        prod = ctx.tmp("prod")
        descs += [op("elementwise_mul", {"X": x, "Y": dout}, {"Out": prod}),
                  op("scale", {"X": prod}, {"Out": dz}, scale=-1.0)]
    return descs
