"""Optimizer update kernels: numpy forms of the update rules in ``program/ops/optimizer.py``, each a new array
per output (the run commits them to the scope only when the whole run succeeded). RMSprop and Adagrad are written once
for both engines (``shared/optimizer``)."""
from __future__ import annotations

import numpy as np

from ...shared.optimizer import adagrad_update, rmsprop_update


def adam(op):
    """``adamw`` is this kernel with its ``coeff``: the parameter the step is taken from is
    ``param * (1 - lr coeff)`` (torch.optim.AdamW's order: shrink, then step)."""
    b1, b2, eps = op.attr("beta1"), op.attr("beta2"), op.attr("epsilon")
    coeff = op.attrs.get("coeff", 0.0)

    def run(param, grad, lr, m1, m2, b1p, b2p):
        m1 = m1 * b1 + grad * (1.0 - b1)  # b1 m1 + (1 - b1) g
        m2 = m2 * b2 + grad * (1.0 - b2) * grad  # b2 m2 + (1 - b2) g g
        lr_t = lr.reshape(()) * np.sqrt(1.0 - b2p) / (1.0 - b1p)
        denominator = np.sqrt(m2) + eps * np.sqrt(1.0 - b2p)
        step = (lr_t * m1 / denominator).astype(param.dtype, copy=False)
        start = param * (1.0 - lr.reshape(()) * coeff) if coeff else param
        return start - step, m1, m2, b1p * b1, b2p * b2

    return run


def lamb(op):
    """Adam's bias-corrected direction plus weight decay, scaled by the trust ratio ||param|| / ||direction||
    (1 when either norm is 0, as Paddle's lamb kernel does)."""
    b1, b2, eps, decay = op.attr("beta1"), op.attr("beta2"), op.attr("epsilon"), op.attr("weight_decay")

    def run(param, grad, lr, m1, m2, b1p, b2p):
        m1 = b1 * m1 + (1.0 - b1) * grad
        m2 = b2 * m2 + (1.0 - b2) * grad * grad
        r = (m1 / (1.0 - b1p)) / (np.sqrt(m2 / (1.0 - b2p)) + eps) + decay * param
        p_norm, r_norm = np.linalg.norm(param.ravel()), np.linalg.norm(r.ravel())
        ratio = p_norm / r_norm if p_norm > 0 and r_norm > 0 else np.ones((), param.dtype)
        return param - (lr.reshape(()) * ratio) * r, m1, m2, b1p * b1, b2p * b2

    return run


def _norm(xs):
    return np.sqrt(sum(float(np.sum(np.square(x, dtype=np.float64))) for x in xs))


def global_norm(op):
    def run(*xs):
        return np.asarray(_norm(xs), dtype=xs[0].dtype)

    return run


def clip_by_global_norm(op):
    max_norm = op.attr("max_norm")

    def run(*xs):
        norm = _norm(xs)
        scale = max_norm / max(norm, max_norm)
        out = tuple((x * scale).astype(x.dtype, copy=False) for x in xs)
        return out[0] if len(out) == 1 else out

    return run


KERNELS = {"adam": adam, "adamw": adam, "lamb": lamb, "rmsprop": rmsprop_update,
           "adagrad": adagrad_update, "global_norm": global_norm,
           "clip_by_global_norm": clip_by_global_norm}
