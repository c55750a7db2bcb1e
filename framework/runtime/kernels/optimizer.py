"""Optimizer update kernels: numpy forms of the update rules in ``program/ops/optimizer.py``."""
from __future__ import annotations

import numpy as np


def sgd(op):
    return lambda param, grad, lr: param - lr.reshape(()) * grad


def sgd_into(op):
    def run(param, grad, lr, buf):
        if buf is None or buf.shape != param.shape or not buf.dtype == param.dtype == grad.dtype == lr.dtype:
            return param - lr.reshape(()) * grad
        np.multiply(grad, lr.reshape(()), out=buf)  # the same roundings as param - lr * grad
        return np.subtract(param, buf, out=buf)

    return run


def momentum(op):
    mu, nesterov = op.attr("mu"), op.attr("use_nesterov")

    def run(param, grad, velocity, lr):
        lr = lr.reshape(())
        v = mu * velocity + grad
        step = grad + mu * v if nesterov else v
        return param - lr * step, v

    return run


def momentum_into(op):
    """The same operations in the same order as ``momentum``, into the parameter's and velocity's buffers."""
    mu, nesterov = op.attr("mu"), op.attr("use_nesterov")
    plain = momentum(op)

    def run(param, grad, velocity, lr, bufs):
        pbuf, vbuf = bufs
        if not (pbuf is not None and vbuf is not None and pbuf.shape == vbuf.shape == param.shape == velocity.shape
                and pbuf.dtype == vbuf.dtype == param.dtype == velocity.dtype == grad.dtype == lr.dtype):
            return plain(param, grad, velocity, lr)
        lr = lr.reshape(())
        np.multiply(velocity, mu, out=vbuf)
        np.add(vbuf, grad, out=vbuf)  # v = mu * velocity + grad
        if nesterov:
            np.multiply(vbuf, mu, out=pbuf)
            np.add(grad, pbuf, out=pbuf)  # step = grad + mu * v
            np.multiply(pbuf, lr, out=pbuf)
        else:
            np.multiply(vbuf, lr, out=pbuf)
        return np.subtract(param, pbuf, out=pbuf), vbuf

    return run


def adam(op):
    b1, b2, eps = op.attr("beta1"), op.attr("beta2"), op.attr("epsilon")

    def run(param, grad, lr, m1, m2, b1p, b2p):
        m1 = b1 * m1 + (1.0 - b1) * grad
        m2 = b2 * m2 + (1.0 - b2) * grad * grad
        lr_t = lr.reshape(()) * np.sqrt(1.0 - b2p) / (1.0 - b1p)
        param = param - (lr_t * m1 / (np.sqrt(m2) + eps * np.sqrt(1.0 - b2p))).astype(param.dtype, copy=False)
        return param, m1, m2, b1p * b1, b2p * b2

    return run


def adam_into(op):
    """The same operations in the same order as ``adam``, into the five outputs' buffers (one temporary left)."""
    b1, b2, eps = op.attr("beta1"), op.attr("beta2"), op.attr("epsilon")
    plain = adam(op)

    def run(param, grad, lr, m1, m2, b1p, b2p, bufs):
        pb, m1b, m2b, b1b, b2b = bufs
        arrays = (param, grad, lr, m1, m2, b1p, b2p)
        if (any(b is None for b in bufs) or param.ndim == 0 or any(a.dtype != param.dtype for a in arrays)
                or not pb.shape == m1b.shape == m2b.shape == param.shape == m1.shape == m2.shape
                or b1b.shape != b1p.shape or b2b.shape != b2p.shape
                or any(b.dtype != param.dtype for b in bufs)):
            return plain(param, grad, lr, m1, m2, b1p, b2p)
        np.multiply(m1, b1, out=m1b)
        np.add(m1b, np.multiply(grad, 1.0 - b1, out=pb), out=m1b)  # m1 = b1 m1 + (1 - b1) grad
        np.multiply(m2, b2, out=m2b)
        np.multiply(grad, 1.0 - b2, out=pb)
        np.add(m2b, np.multiply(pb, grad, out=pb), out=m2b)  # m2 = b2 m2 + (1 - b2) grad grad
        lr_t = lr.reshape(()) * np.sqrt(1.0 - b2p) / (1.0 - b1p)
        np.sqrt(m2b, out=pb)
        np.add(pb, eps * np.sqrt(1.0 - b2p), out=pb)
        np.divide(lr_t * m1b, pb, out=pb)
        np.subtract(param, pb, out=pb)
        return pb, m1b, m2b, np.multiply(b1p, b1, out=b1b), np.multiply(b2p, b2, out=b2b)

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


KERNELS = {"sgd": sgd, "momentum": momentum, "adam": adam, "global_norm": global_norm,
           "clip_by_global_norm": clip_by_global_norm}
INTO = {"sgd": sgd_into, "momentum": momentum_into, "adam": adam_into}
