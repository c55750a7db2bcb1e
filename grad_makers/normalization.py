"""Gradients and tangents of batch_norm and layer_norm (the fused grad ops), and of those grad ops, so second
order works.

Both normalizations are ``Y = widen(Scale) * xhat + widen(Bias)`` with
``xhat = (X - mu) * r``, ``r = (var + epsilon) ** -0.5`` and mu, var the
statistics of X over a group of axes (layer norm: the normalized dims; batch
norm: every axis but the channel axis 1). ``Norm`` holds that structure; the
formulas below are written once against it. With ``dY`` the output gradient
and ``c = dY * widen(Scale)``, the fused grad op computes

    dX = adj(c) = r * (c - mean(c) - xhat * mean(c * xhat))    (means over the group)
    dScale = narrow(dY * xhat),  dBias = narrow(dY)            (sums over the rest)

``adj`` is the transpose of xhat's Jacobian, which is symmetric, so it is
also xhat's tangent. The grad op's outputs are gradients of
``L = <dY, Y>``, so their Jacobian in (X, Scale) is L's Hessian, symmetric
too: the grad op's tangent rule and its grad maker use the same blocks,
``curvature`` (the X-X block, with dX's own Jacobian in X) and ``adj`` (the
X-Scale block). Under batch_norm's is_test the statistics are constants: adj
is ``r * v`` and the curvature vanishes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from gradgen.program.shapes import normalize_axis

from .base import grad_maker
from .builder import Builder, total
from .tangent_rules import tangent_rule

_ORDINARY = ("unsqueeze", "squeeze", "reduce_mean", "reduce_sum", "elementwise_sub", "elementwise_mul",
             "elementwise_div", "elementwise_add", "square", "scale", "pow", "broadcast_to")
"""The ordinary ops the normalization formulas record."""


@dataclass(frozen=True)
class Norm:
    """One normalization's statistics as recorded values: X, r and xhat (shaped to broadcast against X)."""

    g: Builder
    x: str
    r: Any
    xhat: Any
    group: list[int]
    fixed: bool
    widen: Callable[[Any], Any]
    narrow: Callable[[Any], Any]

    def mean(self, v):
        """The mean of ``v`` over the group, kept as size-1 dims."""
        return self.g.reduce_mean(v, self.group, keep_dim=True)

    def adj(self, v):
        """``r * (v - mean(v) - xhat * mean(v * xhat))`` (``r * v`` when the statistics are fixed)."""
        g = self.g
        if self.fixed:
            return g.mul(v, self.r)
        return g.mul(g.sub(g.sub(v, self.mean(v)), g.mul(self.xhat, self.mean(g.mul(v, self.xhat)))), self.r)

    def curvature(self, c, dx, t):
        """d(dX) along X's direction t with c held: ``-r * (mean(xhat t) dX + mean(c xhat) adj(t) +
        xhat mean(c adj(t)))``; None when the statistics are fixed."""
        if self.fixed:
            return None
        g, xt = self.g, self.adj(t)
        terms = g.add(g.add(g.mul(self.mean(g.mul(self.xhat, t)), dx), g.mul(self.mean(g.mul(c, self.xhat)), xt)),
                      g.mul(self.xhat, self.mean(g.mul(c, xt))))
        return g.neg(g.mul(terms, self.r))

    def like_x(self, v):
        """``v`` (which broadcasts against X) spread to X's shape."""
        return self.g.broadcast_to(v, self.x)

    def scaled(self, v, scale: str | None):
        """``v * widen(Scale)``, or ``v`` when there is no Scale."""
        return self.g.mul(v, self.widen(scale)) if scale else v

    def output_tangent(self, scale: str | None, tx, ts, tb):
        """Y = widen(Scale) * xhat + widen(Bias): its change when X, Scale and Bias move by ``tx``, ``ts``, ``tb``
        (each may be None; None when none moves). The bias alone is spread over every position."""
        g = self.g
        moved = total(g, [tx and self.scaled(self.adj(tx), scale), ts and g.mul(self.xhat, self.widen(ts))])
        if moved is None and tb is not None:
            return self.like_x(self.widen(tb))
        return total(g, [moved, tb and self.widen(tb)])


def normalized(g: Builder, x: str, mean, var, epsilon: float, group: list[int], fixed: bool,
               widen: Callable, narrow: Callable) -> Norm:
    """The ``Norm`` of X with statistics ``mean``, ``var`` (shaped to broadcast against X)."""
    r = g.pow(g.scale(var, bias=epsilon), -0.5)
    return Norm(g, x, r, g.mul(g.sub(x, mean), r), group, fixed, widen, narrow)


# -- layer norm -------------------------------------------------------------------------------------------------
def statistics(g: Builder, x: str, group: list[int]) -> tuple[Any, Any]:
    """X's mean and biased variance over ``group``, kept as size-1 dims."""
    mean = g.reduce_mean(x, group, keep_dim=True)
    return mean, g.reduce_mean(g.square(g.sub(x, mean)), group, keep_dim=True)


def layer_norm_view(g: Builder, op) -> Norm:
    """layer_norm's (or layer_norm_grad's) structure, the statistics recomputed from X."""
    x = op.input("X")
    rank = len(op.shape(x))
    begin = normalize_axis(op.attr("begin_norm_axis"), rank)
    group, lead = list(range(begin, rank)), list(range(begin))
    narrow = (lambda v: g.reduce_sum(v, lead)) if lead else (lambda v: v)
    return normalized(g, x, *statistics(g, x, group), op.attr("epsilon"), group, False, lambda v: v, narrow)


def affine(op, slot: str) -> str | None:
    names = op.inputs(slot)
    return names[0] if names else None


def _slot_tangent(op, slot: str):
    return op.tangent(slot) if op.inputs(slot) else None


def _norm_grad_outputs(g: Builder, op_type: str, inputs: dict, attrs: dict, scale, bias) -> dict[str, Any]:
    """Record the fused grad op; its outputs by input slot (Scale, Bias only when asked for)."""
    counts = {"X@GRAD": 1, **({"Scale@GRAD": 1} if scale else {}), **({"Bias@GRAD": 1} if bias else {})}
    outs = g.op(op_type, {k: v for k, v in inputs.items() if v is not None}, attrs, outputs=counts)
    return {slot.removesuffix("@GRAD"): refs[0] for slot, refs in outs.items()}


@grad_maker("layer_norm", emits=("layer_norm_grad", "reduce_mean_grad", "unsqueeze", "elementwise_sub",
                                 "elementwise_mul", "elementwise_add", "scale"))
def layer_norm_grad(g, op):
    """The fused layer_norm_grad; gradients reaching the Mean and Variance outputs (rarely used) add
    ``dMean / n + dVariance * 2 (X - Mean) / n`` with ordinary ops."""
    x, scale, bias = op.input("X"), affine(op, "Scale"), affine(op, "Bias")
    grads = _norm_grad_outputs(g, "layer_norm_grad", {"X": x, "Scale": scale, "Y@GRAD": op.grad("Y")}, op.attrs,
                               scale, bias)
    rank = len(op.shape(x))
    group = list(range(normalize_axis(op.attr("begin_norm_axis"), rank), rank))
    spread = lambda d: g.op("reduce_mean_grad", {"X": x, "Out@GRAD": d}, {"dim": group}, outputs="X@GRAD")  # noqa
    through_stats = [spread(op.grad("Mean")) if op.has_grad("Mean") else None]
    if op.has_grad("Variance"):
        centred = g.sub(x, g.unsqueeze(op.output("Mean"), group))
        through_stats.append(g.mul(spread(op.grad("Variance")), g.scale(centred, 2.0)))
    grads["X"] = total(g, [grads["X"], *through_stats])
    return grads


@tangent_rule("layer_norm", emits=_ORDINARY)
def layer_norm_tangent(g, op):
    """Y's tangent, and the statistics': Mean moves by mean(tX), Variance by 2 mean(xhat tX) / r."""
    tx, ts, tb = op.tangent("X"), _slot_tangent(op, "Scale"), _slot_tangent(op, "Bias")
    if tx is None and ts is None and tb is None:
        return {}
    norm = layer_norm_view(g, op)
    out = {"Y": norm.output_tangent(affine(op, "Scale"), tx, ts, tb)}
    if tx is not None:
        out["Mean"] = g.reduce_mean(tx, norm.group)
        out["Variance"] = g.div(g.scale(g.reduce_mean(g.mul(norm.xhat, tx), norm.group), 2.0),
                                g.squeeze(norm.r, norm.group))
    return out


# -- batch norm -------------------------------------------------------------------------------------------------
def batch_norm_view(g: Builder, op) -> Norm:
    """batch_norm's (or batch_norm_grad's) structure: the batch statistics of X recomputed, or the running
    ones under is_test."""
    x, fixed = op.input("X"), op.attr("is_test")
    group = [0] + list(range(2, len(op.shape(x))))
    widen = lambda v: g.unsqueeze(v, group)  # noqa: E731
    mean, var = (widen(op.input("Mean")), widen(op.input("Variance"))) if fixed else statistics(g, x, group)
    return normalized(g, x, mean, var, op.attr("epsilon"), group, fixed, widen, lambda v: g.reduce_sum(v, group))


@grad_maker("batch_norm", emits=("batch_norm_grad",))
def batch_norm_grad(g, op):
    """The fused batch_norm_grad (it reads the running Mean and Variance only under is_test)."""
    test = op.attr("is_test")
    inputs = {"X": op.input("X"), "Scale": op.input("Scale"), "Mean": op.input("Mean") if test else None,
              "Variance": op.input("Variance") if test else None, "Y@GRAD": op.grad("Y")}
    attrs = {"epsilon": op.attr("epsilon"), "is_test": test}
    return {**_norm_grad_outputs(g, "batch_norm_grad", inputs, attrs, True, True), "Mean": None, "Variance": None}


@tangent_rule("batch_norm", emits=_ORDINARY)
def batch_norm_tangent(g, op):
    """Y's tangent, the statistics moving with X in training (fixed under is_test); the running statistics
    get none."""
    tx, ts, tb = op.tangent("X"), op.tangent("Scale"), op.tangent("Bias")
    if tx is None and ts is None and tb is None:
        return {}
    return {"Y": batch_norm_view(g, op).output_tangent(op.input("Scale"), tx, ts, tb)}


# -- the fused grad ops, differentiated -----------------------------------------------------------------------
def second_order(norm: Norm, scale: str | None, dy: str, dx: str, a, s, b) -> dict[str, Any]:
    """Gradients of ``<a, dX> + <s, dScale> + <b, dBias>`` (each cotangent may be None) in X, Scale and dY."""
    g = norm.g
    c = norm.scaled(dy, scale)
    xa = a and norm.adj(a)
    to_dy = norm.output_tangent(scale, a, s, b)  # Y is linear in Scale, Bias and (through xhat) in adj
    to_x = total(g, [a and norm.curvature(c, dx, a), s and norm.adj(g.mul(dy, norm.widen(s)))])
    grads = {"X": to_x, "Y@GRAD": to_dy}
    if scale:
        grads["Scale"] = xa and norm.narrow(g.mul(dy, xa))
    return grads


def _cotangent(op, slot: str):
    return op.grad(slot) if op.outputs(slot) and op.has_grad(slot) else None


def _grad_of_grad(view: Callable[[Builder, Any], Norm], name: str):
    def maker(g, op):
        scale = affine(op, "Scale")
        grads = second_order(view(g, op), scale, op.input("Y@GRAD"), op.output("X@GRAD"), _cotangent(op, "X@GRAD"),
                             _cotangent(op, "Scale@GRAD"), _cotangent(op, "Bias@GRAD"))
        return {**grads, **{slot: None for slot in ("Mean", "Variance") if op.inputs(slot)}}

    maker.__name__ = maker.__qualname__ = name
    return maker


def _grad_op_tangent(view: Callable[[Builder, Any], Norm]):
    """X@GRAD moves by curvature(tX) + adj(c's tangent), c = dY * Scale; Scale@GRAD by narrow(tdY xhat +
    dY adj(tX)); Bias@GRAD by narrow(tdY)."""
    def rule(g, op):
        tx, t_dy = op.tangent("X"), op.tangent("Y@GRAD")
        scale, ts = affine(op, "Scale"), _slot_tangent(op, "Scale")
        if tx is None and t_dy is None and ts is None:
            return {}
        norm, dy = view(g, op), op.input("Y@GRAD")
        c = norm.scaled(dy, scale)
        moved_c = total(g, [t_dy and norm.scaled(t_dy, scale),
                            ts and g.mul(dy, norm.widen(ts))])
        xt = tx and norm.adj(tx)
        out = {"X@GRAD": total(g, [tx and norm.curvature(c, op.output("X@GRAD"), tx),
                                   moved_c and norm.adj(moved_c)])}
        if op.outputs("Scale@GRAD"):
            out["Scale@GRAD"] = total(g, [t_dy and norm.narrow(g.mul(t_dy, norm.xhat)),
                                          xt and norm.narrow(g.mul(dy, xt))])
        if op.outputs("Bias@GRAD"):
            out["Bias@GRAD"] = t_dy and norm.narrow(t_dy)
        return out

    return rule


layer_norm_grad_grad = grad_maker("layer_norm_grad", emits=_ORDINARY)(
    _grad_of_grad(layer_norm_view, "layer_norm_grad_grad"))
layer_norm_grad_tangent = tangent_rule("layer_norm_grad", emits=_ORDINARY)(_grad_op_tangent(layer_norm_view))
batch_norm_grad_grad = grad_maker("batch_norm_grad", emits=_ORDINARY)(
    _grad_of_grad(batch_norm_view, "batch_norm_grad_grad"))
batch_norm_grad_tangent = tangent_rule("batch_norm_grad", emits=_ORDINARY)(_grad_op_tangent(batch_norm_view))

__all__ = ["Norm", "affine", "normalized", "statistics", "layer_norm_view", "batch_norm_view", "second_order",
           "layer_norm_grad", "layer_norm_tangent", "batch_norm_grad", "batch_norm_tangent", "layer_norm_grad_grad",
           "layer_norm_grad_tangent", "batch_norm_grad_grad", "batch_norm_grad_tangent"]
