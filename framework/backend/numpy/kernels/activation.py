"""Unary elementwise kernels, written to stay finite where the math is (stable sigmoid, softplus).

The plain ufuncs are kernels as they are; the others are small functions of numpy's whole-array operations.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import erf as scipy_erf



def _sigmoid(x):
    # exp of a non-positive number never overflows.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype, copy=False)


def _softplus(x):
    return (np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))).astype(x.dtype, copy=False)


def _silu(x):
    return (x * _sigmoid(x)).astype(x.dtype, copy=False)


def _fixed(fn):
    return lambda op: fn


def relu(op):
    return lambda x: np.maximum(x, 0)


def leaky_relu(op):
    alpha = op.attr("alpha")
    return lambda x: np.where(x > 0, x, x * alpha).astype(x.dtype, copy=False)


def erf_(op):
    """scipy's erf ufunc, in X's dtype (scipy computes float16 in float32)."""
    return lambda x: scipy_erf(x).astype(x.dtype, copy=False)


def gelu(x):
    """x * Phi(x), Phi the standard normal CDF, in x's dtype."""
    return (x * (0.5 * (1.0 + scipy_erf(x * (1.0 / math.sqrt(2.0)))))).astype(x.dtype, copy=False)


def gelu_grad(x, dout):
    """dout * (Phi(x) + x phi(x)), gelu's derivative times the incoming gradient, in dout's dtype."""
    cdf = 0.5 * (1.0 + scipy_erf(x * (1.0 / math.sqrt(2.0))))
    pdf = np.exp(-0.5 * x * x) * (1.0 / math.sqrt(2.0 * math.pi))
    return (dout * (cdf + x * pdf)).astype(dout.dtype, copy=False)


def elu(op):
    alpha = op.attr("alpha")
    # expm1 of a non-positive number: accurate near 0 and never overflows.
    return lambda x: np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))).astype(x.dtype, copy=False)


def scale(op):
    s, b = op.attr("scale"), op.attr("bias")
    if s == 1.0 and b == 0.0:
        return lambda x: x  # the identity shares its input: no buffer
    dtype = op.block.var(op.input("X")[0]).dtype
    if not dtype.startswith("float"):
        return _int_scale(np.dtype(dtype), int(s), int(b))
    return (lambda x: x * s) if b == 0.0 else (lambda x: x * s + b)


def _int_scale(dtype: np.dtype, s: int, b: int):
    """``x * s + b`` in X's integer dtype, exactly (the schema made sure s and b are whole numbers it holds);
    overflow wraps around, as numpy's integer arithmetic does."""
    s, b = dtype.type(s), dtype.type(b)

    def run(x):
        with np.errstate(over="ignore"):
            return np.add(np.multiply(x, s, dtype=dtype), b, dtype=dtype)

    return run


def clip(op):
    lo, hi = op.attr("min"), op.attr("max")
    return lambda x: np.clip(x, lo, hi)


def pow_(op):
    factor = op.attr("factor")
    return lambda x: np.power(x, factor)


def relu_grad(op):
    # dout * (out > 0): one pass, several times faster than np.where on big arrays. It differs from a
    # select only where dout is already NaN or Inf at an inactive unit (NaN instead of 0) or negative (-0.0).
    return lambda y, dout: np.multiply(dout, y > 0)


def tanh_grad(op):
    return lambda y, dout: (1.0 - y * y) * dout


def sigmoid_grad(op):
    return lambda y, dout: (1.0 - y) * y * dout


KERNELS = {
    "relu": relu,
    "sigmoid": _fixed(_sigmoid),
    "tanh": _fixed(np.tanh),
    "exp": _fixed(np.exp),
    "log": _fixed(np.log),
    "sqrt": _fixed(np.sqrt),
    "square": _fixed(np.square),
    "abs": _fixed(np.abs),
    "sin": _fixed(np.sin),
    "cos": _fixed(np.cos),
    "gelu": _fixed(gelu),
    "softplus": _fixed(_softplus),
    "reciprocal": _fixed(np.reciprocal),
    "sign": _fixed(np.sign),
    "leaky_relu": leaky_relu,
    "scale": scale,
    "clip": clip,
    "pow": pow_,
    "erf": erf_,
    "silu": _fixed(_silu),
    "elu": elu,
    "relu_grad": relu_grad,
    "tanh_grad": tanh_grad,
    "sigmoid_grad": sigmoid_grad,
}
