"""Unary elementwise ops (activations and friends) and their fused gradient ops."""
from __future__ import annotations

import math

from ..dtypes import FLOAT_DTYPES, INT_DTYPES, NUMERIC_DTYPES, unrepresentable
from ..schema import Attr, TensorType, same_as, schema, xp_function


def _scale(ctx):
    """On integers scale and bias must be whole numbers the dtype holds: the result is exact, never truncated."""
    x = ctx.input("X")
    if x.dtype in INT_DTYPES:
        for name in ("scale", "bias"):
            problem = unrepresentable(ctx.attr(name), x.dtype)
            if problem is not None:
                ctx.fail(f"{name} {problem}; X is {x.dtype} (cast X to a float dtype to scale by fractions)")
    return {"Out": x}


def _grad_like(slot: str, out: str):
    def infer(ctx):
        a = ctx.input(slot)
        return {out: TensorType(a.shape, a.dtype)}

    return infer


UNARY_ATTRS = {
    "relu": {}, "sigmoid": {}, "tanh": {}, "exp": {}, "log": {}, "sqrt": {}, "square": {}, "abs": {},
    "sin": {}, "cos": {}, "gelu": {}, "softplus": {}, "reciprocal": {}, "sign": {},
    "leaky_relu": {"alpha": Attr("float", 0.01)},
    "scale": {"scale": Attr("scalar", 1.0), "bias": Attr("scalar", 0.0)},
    "clip": {"min": Attr("float", float("-inf")), "max": Attr("float", float("inf"))},
    "pow": {"factor": Attr("float", 1.0)},
    "erf": {}, "silu": {}, "elu": {"alpha": Attr("float", 1.0)},
}
"""Every unary op type and its attrs: Out = f(X), same shape and dtype."""

EXACT_ON_INTS = ("scale", "abs", "sign", "square")
"""The unary ops that also take integers, computed exactly in X's dtype; the others take floats only."""


# The math, once, over an array namespace ``xp`` (numpy, jax.numpy): every engine runs these same formulas.
# They stay finite where the function is: sigmoid and softplus only exponentiate non-positive numbers, elu
# takes expm1 of a non-positive number.
def sigmoid(xp, x):
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def softplus(xp, x):
    return xp.maximum(x, 0) + xp.log1p(xp.exp(-xp.abs(x)))


def gelu(xp, x):
    """x Phi(x), Phi the standard normal CDF: the exact gelu."""
    return x * (0.5 * (1.0 + xp.erf(x * INV_SQRT2)))


def gelu_grad(xp, x, dout):
    """dout (Phi(x) + x phi(x)): the exact gelu's derivative times the incoming gradient."""
    cdf = 0.5 * (1.0 + xp.erf(x * INV_SQRT2))
    return dout * (cdf + x * (xp.exp(-0.5 * x * x) * INV_SQRT_2PI))


def scale(xp, x, *, scale, bias):
    """x * scale + bias; on integers in X's dtype, wrapping on overflow (the schema made sure scale and bias are
    whole numbers the dtype holds)."""
    if scale == 1 and bias == 0:
        return x
    if xp.isdtype(x.dtype, "integral"):
        return x * xp.asarray(int(scale), dtype=x.dtype) + xp.asarray(int(bias), dtype=x.dtype)
    return x * scale if bias == 0 else x * scale + bias


def relu_grad(xp, y, dout):
    """dout where the unit is active, else ``dout * 0``: an infinite or NaN dout gives NaN there, as a product
    with the 0/1 mask would (a select written as a product lets XLA turn it into 0)."""
    return xp.where(y > 0, dout, dout * 0)


INV_SQRT2 = 1.0 / math.sqrt(2.0)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)

OUTPUT_SLOPES = {
    "relu": lambda xp, y, v: xp.astype(v > 0, v.dtype),
    "sigmoid": lambda xp, y, v: (1.0 - y) * y,
    "tanh": lambda xp, y, v: 1.0 - y * y,
    "softplus": lambda xp, y, v: 1.0 - xp.exp(-y),
}
"""op type -> its derivative written in its output ``y``: ``slope(xp, y, v)``, ``v`` y's plain value where the
slope is piecewise (a mask must not carry a dual number's part). The fused grads from the output and the LSTM/GRU
gate activations (``recurrent.ACTIVATIONS``) read these."""

COMPUTE = {
    **{t: xp_function(t) for t in ("tanh", "exp", "log", "sqrt", "abs", "sin", "cos", "sign", "erf")},
    "relu": lambda xp, x: xp.maximum(x, 0),
    "sigmoid": sigmoid,
    "square": lambda xp, x: x * x,
    "gelu": gelu,
    "softplus": softplus,
    "reciprocal": lambda xp, x: 1.0 / x,
    "leaky_relu": lambda xp, x, *, alpha: xp.where(x > 0, x, x * alpha),
    "scale": scale,
    "clip": lambda xp, x, *, min, max: xp.clip(x, min, max),
    "pow": lambda xp, x, *, factor: xp.pow(x, factor),
    "silu": lambda xp, x: x * sigmoid(xp, x),
    "elu": lambda xp, x, *, alpha: xp.where(x > 0, x, alpha * xp.expm1(xp.minimum(x, 0))),
    "relu_grad": relu_grad,
    "tanh_grad": lambda xp, y, dout: OUTPUT_SLOPES["tanh"](xp, y, y) * dout,
    "sigmoid_grad": lambda xp, y, dout: OUTPUT_SLOPES["sigmoid"](xp, y, y) * dout,
}
"""op type -> its computation over ``xp`` (``OpSchema.compute``)."""

ONNX = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
        "abs": "Abs", "sin": "Sin", "cos": "Cos", "reciprocal": "Reciprocal", "sign": "Sign", "softplus": "Softplus",
        "erf": "Erf"}
"""op type -> the ONNX operator that is the op as one node (``OpSchema.onnx``)."""


def _exp_stays_finite(ops, x) -> bool:
    """Whether exp(-x) is finite for every element of ``x`` (float32 or float64): where it overflows, ATen's
    1 / (1 + exp(-x)) gives 0 and the compute's stable form e / (1 + e) the tiny value it is (log of it finite)."""
    return float(ops.amin(x)) > (-88.0 if x.dtype.itemsize == 4 else -708.0)


def _gelu_aten(ops, x):
    """ATen's gelu, declined where it overflowed: its float32 vector kernel forms x (1 + erf(x / sqrt 2)) before
    halving, infinite for x over half the largest float (3e38 gave inf where the compute's x Phi(x) is 3e38; its
    scalar kernel, for short tensors, did not). The output's sum, finite exactly where no element is infinite,
    decides (a finite output whose sum overflows takes the compute too), and proves it finite for the next kernel
    (``aten_finite_out``)."""
    out = ops.gelu(x)
    return out if math.isfinite(float(ops.sum(out))) else None


ATEN = {
    "gelu": _gelu_aten,
    "gelu_grad": lambda ops, x, dout: ops.gelu_backward(dout, x),
    "leaky_relu": lambda ops, x, *, alpha: ops.leaky_relu(x, alpha),
    "leaky_relu_grad": lambda ops, x, dout, *, alpha: ops.leaky_relu_backward(dout, x, alpha, False),
    "sigmoid": lambda ops, x: ops.sigmoid(x) if _exp_stays_finite(ops, x) else None,
    "silu": lambda ops, x: ops.silu(x) if _exp_stays_finite(ops, x) else None,
}
"""op type -> the op as one ATen call (``OpSchema.aten``; None where it would part from the compute on these
values), where the torch engine measured it faster than the compute's passes (erf, exp, each product and each
``where`` a pass of its own; torch's ``where`` on a bool mask took 3.8-4.4 ms over [16, 128, 1024] float32, a
copy 0.12). The torch engine's kernels against the computes on [16, 128, 1024] float32, two threads, checks
included, medians of 11 rounds (2026-11-30): gelu 0.60 ms against 2.8, its gradient 1.3 against 6.1, sigmoid 0.61
against 10.4, silu 0.62 against 10-22, leaky_relu 0.22 against 5.1, its gradient 0.38 against 4.8; on [64, 1024]:
0.073 / 0.114, 0.078 / 0.183, 0.044 / 0.212, 0.048 / 0.243, 0.022 / 0.086, 0.036 / 0.091. The transformer block's
step on the torch engine went from 1.17x PyTorch's to 1.08x with gelu's two (``tests/bench/torch_vs_pytorch.py
transformer``)."""

FINITE_OUT = ("gelu", "sigmoid", "silu")
"""The ops whose ``ATEN`` call gives a finite output for finite inputs it does not decline (``aten_finite_out``):
sigmoid's in [0, 1], silu's x sigmoid(x) and gelu's x Phi(x) at most |x|."""

ANY_VALUES = ("gelu",)
"""The ops whose ``ATEN`` call declines every input that is not finite, so the torch engine need not sum the input
first (``aten_any_values``): ATen's gelu gives NaN or an infinity for NaN, inf and -inf (float32 and float64, its
scalar and vector kernels), and ``_gelu_aten`` declines an output that is not finite. Inside the transformer block's
step (two threads) gelu's kernel took 1.63 ms without the input's sum and 2.09 with it (2026-12-01)."""

FINITE_FROM_FINITE = ("relu", "abs", "sign", "sin", "cos", "erf", "sigmoid", "tanh")
"""The ops whose output is finite whenever the input is (``OpSchema.finite_from_finite``): max(x, 0) and |x| no larger
than |x|, the others bounded by 1."""

_FROM_OUTPUT = {"Out": FLOAT_DTYPES, "Out@GRAD": "Out"}
_FROM_INPUT = {"X": FLOAT_DTYPES, "Out@GRAD": "X"}
_LIKE_X = _grad_like("X", "X@GRAD")

SCHEMAS = tuple(
    schema(t, ["X"], ["Out"], _scale if t == "scale" else same_as("X"), attrs,
           dtypes={"X": NUMERIC_DTYPES if t in EXACT_ON_INTS else FLOAT_DTYPES}, compute=COMPUTE[t],
           onnx=ONNX.get(t), aten=ATEN.get(t), aten_finite_out=t in FINITE_OUT, aten_any_values=t in ANY_VALUES,
           finite_from_finite=t in FINITE_FROM_FINITE)
    for t, attrs in UNARY_ATTRS.items()
) + (
    schema("relu_grad", ["Out", "Out@GRAD"], ["X@GRAD"], _grad_like("Out", "X@GRAD"),
           doc="X@GRAD = Out@GRAD where Out > 0, else 0: relu's gradient in one pass.", dtypes=_FROM_OUTPUT,
           compute=COMPUTE["relu_grad"]),
    schema("tanh_grad", ["Out", "Out@GRAD"], ["X@GRAD"], _grad_like("Out", "X@GRAD"),
           doc="X@GRAD = Out@GRAD * (1 - Out^2): tanh's gradient from its output, in one op.", dtypes=_FROM_OUTPUT,
           compute=COMPUTE["tanh_grad"]),
    schema("sigmoid_grad", ["Out", "Out@GRAD"], ["X@GRAD"], _grad_like("Out", "X@GRAD"),
           doc="X@GRAD = Out@GRAD * Out * (1 - Out): sigmoid's gradient from its output, in one op.",
           dtypes=_FROM_OUTPUT, compute=COMPUTE["sigmoid_grad"]),
    schema("leaky_relu_grad", ["X", "Out@GRAD"], ["X@GRAD"], _LIKE_X, {"alpha": Attr("float", 0.01)},
           doc="X@GRAD = Out@GRAD where X > 0, else alpha * Out@GRAD.", dtypes=_FROM_INPUT,
           compute=lambda xp, x, dout, *, alpha: xp.where(x > 0, dout, dout * alpha), aten=ATEN["leaky_relu_grad"]),
    schema("clip_grad", ["X", "Out@GRAD"], ["X@GRAD"], _LIKE_X,
           {"min": Attr("float", float("-inf")), "max": Attr("float", float("inf"))},
           doc="X@GRAD = Out@GRAD where min < X < max, else 0.", dtypes=_FROM_INPUT,
           compute=lambda xp, x, dout, *, min, max: xp.where((x > min) & (x < max), dout, 0)),
    schema("elu_grad", ["X", "Out@GRAD"], ["X@GRAD"], _LIKE_X, {"alpha": Attr("float", 1.0)},
           doc="X@GRAD = Out@GRAD where X > 0, else Out@GRAD * alpha * exp(X): elu's gradient in one pass.",
           dtypes=_FROM_INPUT,
           compute=lambda xp, x, dout, *, alpha: xp.where(x > 0, dout, dout * (alpha * xp.exp(xp.minimum(x, 0))))),
    schema("gelu_grad", ["X", "Out@GRAD"], ["X@GRAD"], _LIKE_X,
           doc="X@GRAD = Out@GRAD * (Phi(X) + X * phi(X)), the exact gelu's derivative.", dtypes=_FROM_INPUT,
           compute=gelu_grad, aten=ATEN["gelu_grad"]),
)


__all__ = ["ANY_VALUES", "ATEN", "COMPUTE", "EXACT_ON_INTS", "FINITE_FROM_FINITE", "FINITE_OUT", "INV_SQRT2",
           "INV_SQRT_2PI", "ONNX", "OUTPUT_SLOPES", "SCHEMAS", "UNARY_ATTRS", "gelu", "gelu_grad", "relu_grad", "scale",
           "sigmoid", "softplus"]
