"""Lowerings of the optimizer updates and learning-rate schedules: the numpy kernels' formulas
(``backend/numpy/kernels/optimizer.py``, ``lr_schedule.py``) in ``jax.numpy``, in the same order and dtypes (each
output cast to its declared dtype, as the kernels' buffers hold it).

The schedules read the step as a Python int and compute in float64 before the cast: so do these.
"""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from ..numpy.kernels.optimizer import adagrad_update, rmsprop_update

__all__ = ["LOWERINGS"]


def _declared(op) -> list[np.dtype]:
    return [np.dtype(op.block.var(n).dtype) for n in op.output_arg_names]


def _cast_to_declared(op, fn):
    """``fn``'s outputs cast to the dtypes the op's output vars declare."""
    dtypes = _declared(op)
    return lambda *xs: tuple(v.astype(d) for v, d in zip(fn(*xs), dtypes))


def _sgd(op, ctx):
    return lambda param, grad, lr: (param - grad * lr.reshape(())).astype(param.dtype)


def _momentum(op, ctx):
    mu, nesterov = op.attr("mu"), op.attr("use_nesterov")

    def run(param, grad, velocity, lr):
        v = velocity * mu + grad
        step = grad + v * mu if nesterov else v
        return param - step * lr.reshape(()), v

    return _cast_to_declared(op, run)


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


# -- learning-rate schedules --------------------------------------------------------------------------------


def _step(step):
    return step.reshape(())


def _piecewise_decay(op, ctx):
    boundaries, values, dtype = op.attr("boundaries"), op.attr("values"), np.dtype(op.attr("dtype"))
    table = np.asarray(values, dtype=dtype)

    def run(step):
        s = _step(step)
        return jnp.asarray(table)[sum((s >= b).astype(np.int64) for b in boundaries) if boundaries else 0]

    return run


def _exponential_decay(op, ctx):
    lr, steps, rate, stair, dtype = (op.attr("learning_rate"), op.attr("decay_steps"), op.attr("decay_rate"),
                                     op.attr("staircase"), np.dtype(op.attr("dtype")))

    def run(step):
        exponent = _step(step).astype(np.float64) / steps
        return (lr * jnp.power(np.float64(rate), jnp.floor(exponent) if stair else exponent)).astype(dtype)

    return run


def _cosine_decay(op, ctx):
    lr, per_epoch, epochs, dtype = (op.attr("learning_rate"), op.attr("step_each_epoch"), op.attr("epochs"),
                                    np.dtype(op.attr("dtype")))

    def run(step):
        epoch = jnp.floor_divide(_step(step).astype(np.int64), per_epoch)
        return (lr * 0.5 * (jnp.cos(epoch * math.pi / epochs) + 1.0)).astype(dtype)

    return run


def _linear_lr_warmup(op, ctx):
    warmup, start, end = op.attr("warmup_steps"), op.attr("start_lr"), op.attr("end_lr")

    def run(step, lr):
        s = _step(step).astype(np.int64)
        ramp = (start + (end - start) * s.astype(np.float64) / warmup).astype(lr.dtype)
        return jnp.where(s < warmup, ramp, lr.reshape(()))

    return run


LOWERINGS = {
    "sgd": _sgd, "momentum": _momentum, "adam": _adam, "adamw": _adam, "lamb": _lamb, "rmsprop": _rmsprop,
    "adagrad": _adagrad, "global_norm": _global_norm, "clip_by_global_norm": _clip_by_global_norm,
    "piecewise_decay": _piecewise_decay, "exponential_decay": _exponential_decay, "cosine_decay": _cosine_decay,
    "linear_lr_warmup": _linear_lr_warmup,
}
