"""Lowerings of the optimizer updates: the numpy kernels' formulas (``backend/numpy/kernels/optimizer.py``) in
``jax.numpy``, in the same order and dtypes (each output cast to its declared dtype, as the kernels' buffers hold
it); RMSprop's and Adagrad's are the kernels' own, written once over ``xp`` (``shared/optimizer``).
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ...shared.optimizer import adagrad_update, rmsprop_update

__all__ = ["LOWERINGS"]


def _declared(op) -> list[np.dtype]:
    return [np.dtype(op.block.var(n).dtype) for n in op.output_arg_names]


def _cast_to_declared(op, fn):
    """``fn``'s outputs cast to the dtypes the op's output vars declare."""
    dtypes = _declared(op)
    return lambda *xs: tuple(v.astype(d) for v, d in zip(fn(*xs), dtypes))


def _adam(op, ctx):
    """Adam, and AdamW with its ``coeff``: the step is taken from ``param * (1 - lr coeff)``."""
    b1, b2, eps = op.attr("beta1"), op.attr("beta2"), op.attr("epsilon")
    coeff = op.attrs.get("coeff", 0.0)

    def run(param, grad, lr, m1, m2, b1p, b2p):
        lr = lr.reshape(())
        m1 = m1 * b1 + grad * (1.0 - b1)
        m2 = m2 * b2 + grad * (1.0 - b2) * grad
        lr_t = lr * jnp.sqrt(1.0 - b2p) / (1.0 - b1p)
        denominator = jnp.sqrt(m2) + eps * jnp.sqrt(1.0 - b2p)
        step = (lr_t * m1 / denominator).astype(param.dtype)
        start = param * (1.0 - lr * coeff) if coeff else param
        return start - step, m1, m2, b1p * b1, b2p * b2

    return _cast_to_declared(op, run)


def _norm2(x):
    return jnp.sqrt(jnp.sum(x * x))


def _lamb(op, ctx):
    """Adam's direction plus weight decay, scaled by ||param|| / ||direction|| (1 when either is 0)."""
    b1, b2, eps, decay = op.attr("beta1"), op.attr("beta2"), op.attr("epsilon"), op.attr("weight_decay")

    def run(param, grad, lr, m1, m2, b1p, b2p):
        m1 = b1 * m1 + (1.0 - b1) * grad
        m2 = b2 * m2 + (1.0 - b2) * grad * grad
        r = (m1 / (1.0 - b1p)) / (jnp.sqrt(m2 / (1.0 - b2p)) + eps) + decay * param
        p_norm, r_norm = _norm2(param), _norm2(r)
        both = (p_norm > 0) & (r_norm > 0)
        ratio = jnp.where(both, p_norm / jnp.where(both, r_norm, 1), jnp.ones((), param.dtype))
        return param - (lr.reshape(()) * ratio) * r, m1, m2, b1p * b1, b2p * b2

    return _cast_to_declared(op, run)


def _rmsprop(op, ctx):
    return _cast_to_declared(op, rmsprop_update(op, jnp))


def _adagrad(op, ctx):
    return _cast_to_declared(op, adagrad_update(op, jnp))


def _global_norm_f64(xs):
    """The norm of all of ``xs`` together, summed in float64 as the numpy kernel does."""
    return jnp.sqrt(sum(jnp.sum(jnp.square(x.astype(np.float64))) for x in xs))


def _global_norm(op, ctx):
    return lambda *xs: _global_norm_f64(xs).astype(xs[0].dtype)


def _clip_by_global_norm(op, ctx):
    max_norm = op.attr("max_norm")

    def run(*xs):
        scale = max_norm / jnp.maximum(_global_norm_f64(xs), max_norm)
        out = tuple((x * scale).astype(x.dtype) for x in xs)  # as numpy: by a float64 scale, then rounded
        return out[0] if len(out) == 1 else out

    return run


LOWERINGS = {
    "adam": _adam, "adamw": _adam, "lamb": _lamb, "rmsprop": _rmsprop,
    "adagrad": _adagrad, "global_norm": _global_norm, "clip_by_global_norm": _clip_by_global_norm,
}
