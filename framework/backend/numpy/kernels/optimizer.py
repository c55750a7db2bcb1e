"""Optimizer update kernels: numpy forms of the update rules in ``program/ops/optimizer.py``.

``sgd``, ``momentum``, ``adam`` and ``adamw`` write their new values into the plan's
buffers when given ones that fit (the plan double-buffers parameters and
optimizer state), with the same operations in the same order as without.
"""
from __future__ import annotations

import numpy as np

from .signature import fits


def sgd(op):
    def run(param, grad, lr, *, out=None):  # param - lr * grad
        if out is not None and not (fits(out, param, grad) and lr.dtype == param.dtype):
            out = None
        step = np.multiply(grad, lr.reshape(()), out=out)
        return np.subtract(param, step, out=out)

    return run


def momentum(op):
    mu, nesterov = op.attr("mu"), op.attr("use_nesterov")

    def run(param, grad, velocity, lr, *, out=None):
        if out is None or not (fits(out[0], param, grad, velocity) and fits(out[1], param)
                               and lr.dtype == param.dtype):
            out = (None, None)
        pbuf, vbuf = out
        lr = lr.reshape(())
        v = np.multiply(velocity, mu, out=vbuf)
        v = np.add(v, grad, out=vbuf)  # v = mu * velocity + grad
        step = np.add(grad, np.multiply(v, mu, out=pbuf), out=pbuf) if nesterov else v  # grad + mu * v, or v
        step = np.multiply(step, lr, out=pbuf)
        return np.subtract(param, step, out=pbuf), v

    return run


def _adam_buffers(out, param, grad, lr, m1, m2, b1p, b2p) -> bool:
    """Adam writes into its five buffers only when all arrays share one dtype and the shapes agree."""
    pb, m1b, m2b, b1b, b2b = out
    return (param.ndim != 0 and fits(pb, param, grad, m1, m2) and fits(m1b, param) and fits(m2b, param)
            and fits(b1b, b1p) and fits(b2b, b2p) and lr.dtype == b1p.dtype == b2p.dtype == param.dtype)


def adam(op):
    """With buffers, every array operation but one (``lr_t * m1``) writes into them, the parameter's buffer
    serving as the temporary. ``adamw`` is this kernel with its ``coeff``: the parameter the step is taken
    from is ``param * (1 - lr coeff)`` (torch.optim.AdamW's order: shrink, then step), one more temporary."""
    b1, b2, eps = op.attr("beta1"), op.attr("beta2"), op.attr("epsilon")
    coeff = op.attrs.get("coeff", 0.0)

    def run(param, grad, lr, m1, m2, b1p, b2p, *, out=None):
        if out is None or not _adam_buffers(out, param, grad, lr, m1, m2, b1p, b2p):
            out = (None,) * 5
        pb, m1b, m2b, b1b, b2b = out
        m1 = np.add(np.multiply(m1, b1, out=m1b), np.multiply(grad, 1.0 - b1, out=pb), out=m1b)  # b1 m1 + (1 - b1) g
        t = np.multiply(np.multiply(grad, 1.0 - b2, out=pb), grad, out=pb)
        m2 = np.add(np.multiply(m2, b2, out=m2b), t, out=m2b)  # b2 m2 + (1 - b2) g g
        lr_t = lr.reshape(()) * np.sqrt(1.0 - b2p) / (1.0 - b1p)
        denominator = np.add(np.sqrt(m2, out=pb), eps * np.sqrt(1.0 - b2p), out=pb)
        step = np.divide(lr_t * m1, denominator, out=pb).astype(param.dtype, copy=False)
        start = param * (1.0 - lr.reshape(()) * coeff) if coeff else param
        return (np.subtract(start, step, out=pb), m1, m2, np.multiply(b1p, b1, out=b1b),
                np.multiply(b2p, b2, out=b2b))

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


def rmsprop_update(op, xp=np):
    """torch.optim.RMSprop's update: epsilon added outside the root, the learning rate outside the moment.
    Written once over the array module ``xp``: numpy here, ``jax.numpy`` in the xla lowering."""
    rho, eps, mu, centered = op.attr("rho"), op.attr("epsilon"), op.attr("momentum"), op.attr("centered")

    def run(param, grad, lr, mean_square, mean_grad, moment):
        mean_square = rho * mean_square + (1.0 - rho) * grad * grad
        if centered:
            mean_grad = rho * mean_grad + (1.0 - rho) * grad
            avg = xp.sqrt(mean_square - mean_grad * mean_grad) + eps
        else:
            avg = xp.sqrt(mean_square) + eps
        moment = mu * moment + grad / avg
        return param - lr.reshape(()) * moment, mean_square, mean_grad, moment

    return run


def adagrad_update(op, xp=np):
    """The sum of squared gradients scales each coordinate's step (``xp`` as ``rmsprop_update``'s)."""
    eps = op.attr("epsilon")

    def run(param, grad, lr, moment):
        moment = moment + grad * grad
        return param - lr.reshape(()) * grad / (xp.sqrt(moment) + eps), moment

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


KERNELS = {"sgd": sgd, "momentum": momentum, "adam": adam, "adamw": adam, "lamb": lamb, "rmsprop": rmsprop_update,
           "adagrad": adagrad_update, "global_norm": global_norm,
           "clip_by_global_norm": clip_by_global_norm}
