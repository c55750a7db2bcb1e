"""Tangents of batch_norm, layer_norm and their fused grad ops, from the formulas in ``grad_makers.normalization``.

The grad ops' outputs are gradients of ``L = <dY, Y>`` in (X, Scale, Bias), so
their tangent in (X, Scale) is L's Hessian applied to it, the blocks the grad
op's own maker uses (``Norm.curvature``, ``Norm.adj``); in dY they are linear.
"""
from __future__ import annotations

from .. import normalization as reverse
from ..normalization import Norm
from ..tangent_rules import tangent_rule, total

_EMITS = reverse._ORDINARY


def _slot_tangent(op, slot: str):
    return op.tangent(slot) if op.inputs(slot) else None


@tangent_rule("batch_norm", emits=_EMITS)
def batch_norm_tangent(g, op):
    """Y's tangent, the statistics moving with X in training (fixed under is_test); the running statistics
    get none."""
    tx, ts, tb = op.tangent("X"), op.tangent("Scale"), op.tangent("Bias")
    if tx is None and ts is None and tb is None:
        return {}
    return {"Y": reverse.batch_norm_view(g, op).output_tangent(op.input("Scale"), tx, ts, tb)}


@tangent_rule("layer_norm", emits=_EMITS)
def layer_norm_tangent(g, op):
    """Y's tangent, and the statistics': Mean moves by mean(tX), Variance by 2 mean(xhat tX) / r."""
    tx, ts, tb = op.tangent("X"), _slot_tangent(op, "Scale"), _slot_tangent(op, "Bias")
    if tx is None and ts is None and tb is None:
        return {}
    norm = reverse.layer_norm_view(g, op)
    out = {"Y": norm.output_tangent(reverse.affine(op, "Scale"), tx, ts, tb)}
    if tx is not None:
        out["Mean"] = g.reduce_mean(tx, norm.group)
        out["Variance"] = g.div(g.scale(g.reduce_mean(g.mul(norm.xhat, tx), norm.group), 2.0),
                                g.squeeze(norm.r, norm.group))
    return out


def _grad_op_tangent(view):
    """X@GRAD moves by curvature(tX) + adj(c's tangent), c = dY * Scale; Scale@GRAD by narrow(tdY xhat +
    dY adj(tX)); Bias@GRAD by narrow(tdY)."""
    def rule(g, op):
        tx, t_dy = op.tangent("X"), op.tangent("Y@GRAD")
        scale, ts = reverse.affine(op, "Scale"), _slot_tangent(op, "Scale")
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


layer_norm_grad_tangent = tangent_rule("layer_norm_grad", emits=_EMITS)(_grad_op_tangent(reverse.layer_norm_view))
batch_norm_grad_tangent = tangent_rule("batch_norm_grad", emits=_EMITS)(_grad_op_tangent(reverse.batch_norm_view))

__all__ = ["batch_norm_tangent", "layer_norm_tangent", "layer_norm_grad_tangent", "batch_norm_grad_tangent"]
