"""Optimizer updates and their helpers, as ops: each writes its outputs into the vars it reads.

``ParamOut`` names the same var as ``Param`` (and likewise for optimizer
state): an update is in place in meaning. Kernels still return new arrays;
the executor commits persistable writes only when a whole run succeeds.
"""
from __future__ import annotations

import numpy as np

from ..dtypes import FLOAT_DTYPES
from ..schema import Attr, Slot, TensorType, schema
from .creation import rounded


def _same_as_param(*pairs: tuple[str, str]):
    """Outputs typed like their inputs; Param's shape is known, and Grad and every state have exactly that shape
    (a -1 dim could broadcast at run time into an update of another shape); LearningRate and the beta powers are
    scalars (shape [] or [1], as Paddle keeps them)."""
    def infer(ctx):
        p = ctx.input("Param")
        if -1 in p.shape:
            ctx.fail(f"Param's shape {list(p.shape)} must be known (no -1): an update keeps its shape")
        for slot in ("Grad",) + tuple(i for i, _ in pairs if i not in ("Param", "Beta1Pow", "Beta2Pow")):
            t = ctx.input(slot)
            if tuple(t.shape) != tuple(p.shape):
                ctx.fail(f"{slot} is {t.dtype}{list(t.shape)} but Param is {p.dtype}{list(p.shape)} "
                         "(the shapes must be equal, with no -1)")
        for slot in ("LearningRate",) + tuple(i for i, _ in pairs if i in ("Beta1Pow", "Beta2Pow")):
            if tuple(ctx.input(slot).shape) not in ((), (1,)):
                ctx.fail(f"{slot} must be a scalar, got shape {list(ctx.input(slot).shape)}")
        return {out: ctx.input(inp) for inp, out in pairs}

    return infer


def _global_norm(ctx):
    xs = ctx.inputs("X")
    return {"Out": TensorType((), xs[0].dtype)}


def _clip_by_norm(ctx):
    xs = ctx.inputs("X")
    return {"Out": [TensorType(t.shape, t.dtype) for t in xs]}


def _dtypes(*like_param: str) -> dict:
    """A float Param, and these slots of Param's dtype."""
    return {"Param": FLOAT_DTYPES, **{slot: "Param" for slot in like_param}}


def sgd(xp, param, grad, lr):
    """Param - lr * Grad (the learning rate a one-element array), computed as Grad * -lr + Param: the same value
    bit for bit (a product's rounding is symmetric in sign, and p + -q is p - q), and numpy then adds Param into
    the product's new array instead of making another (its elision of temporaries: a [4096, 4096] float32 update
    17.1 -> 11.7 ms, the large MLP's first layer)."""
    return grad * -lr.reshape(()) + param


def momentum(xp, param, grad, velocity, lr, *, mu, use_nesterov):
    """(ParamOut, VelocityOut): v = mu * Velocity + Grad; Param - lr * v, or with Nesterov Param - lr * (Grad +
    mu v)."""
    v = velocity * mu + grad
    step = grad + v * mu if use_nesterov else v
    return step * -lr.reshape(()) + param, v  # (Param - lr step, bit for bit, in one new array: ``sgd``)


def _adam_scales(xp, lr, b1p, b2p, epsilon, coeff):
    """Adam's scalars, 0-d (a [1] beta power would make a 0-d Param's step [1]): the step size lr sqrt(1 - b2^t) /
    (1 - b1^t), the bias-corrected epsilon epsilon sqrt(1 - b2^t), and adamw's shrink 1 - lr coeff (1 without a
    coeff)."""
    lr, b1p, b2p = xp.reshape(lr, ()), xp.reshape(b1p, ()), xp.reshape(b2p, ())
    return lr * xp.sqrt(1.0 - b2p) / (1.0 - b1p), epsilon * xp.sqrt(1.0 - b2p), 1.0 - lr * coeff if coeff else 1.0


def adam(xp, param, grad, lr, m1, m2, b1p, b2p, *, beta1, beta2, epsilon, coeff=0.0):
    """(ParamOut, Moment1Out, Moment2Out, Beta1PowOut, Beta2PowOut): m1 = b1 m1 + (1 - b1) g, m2 = b2 m2 +
    (1 - b2) g g; the step lr sqrt(1 - b2^t) / (1 - b1^t) m1 / (sqrt(m2) + epsilon sqrt(1 - b2^t)) taken from Param,
    or with adamw's ``coeff`` from Param (1 - lr coeff) (torch.optim.AdamW's order: shrink, then step)."""
    lr_t, epsilon_t, shrink = _adam_scales(xp, lr, b1p, b2p, epsilon, coeff)
    m1 = m1 * beta1 + grad * (1.0 - beta1)
    m2 = m2 * beta2 + grad * (1.0 - beta2) * grad
    step = xp.astype(lr_t * m1 / (xp.sqrt(m2) + epsilon_t), param.dtype)
    start = param * shrink if coeff else param
    return start - step, m1, m2, b1p * beta1, b2p * beta2


def adam_aten(ops, param, grad, lr, m1, m2, b1p, b2p, *, beta1, beta2, epsilon, coeff=0.0):
    """``adam`` over ATen in 9 passes over the parameter's values where the compute over torch makes 12, and with
    fewer new tensors (each product and sum of the compute is its own pass and tensor): Moment1 as ``mul`` then
    ``add_`` with alpha, a fused multiply-add (one rounding where the compute has two) whose product, the gradient
    times 1 - beta1 in [0, 1], cannot overflow; Moment2 as the compute's own four passes, bit for bit (a fused
    square of the gradient could overflow where the compute's sum does not); epsilon added in place; the step as
    ``addcdiv``, which computes Param + (-lr_t m1) / denominator in the compute's order, bit for bit. The scalars
    are the compute's own (``_adam_scales``) over numpy, on arrays of the tensors' values, dtypes and shapes. NaN
    and infinities come out where the compute's do, but for a Moment1 within a rounding of the largest float,
    which one rounding may carry to infinity where two do not (or the reverse), as XLA's fused loops may; so the
    torch engine calls it on any values (``OpSchema.aten_any_values``). Betas outside [0, 1], or beta powers of
    more than one value, take the compute.

    Measured (2026-12-01, two threads, the anchors' transformer block's 16 parameters, 789,760 float32 values,
    medians of 30 in one process, the two interleaved): with Moment2 fused too (7 passes), the kernels 3.5-4.9 ms
    a step against the compute's 5.2-12.3 (the machine's speed drifting; each pair taken together;
    ``torch.optim.Adam``'s 2.0-3.0, in place), and the block's whole step on the torch engine, both kinds in one
    process, in turn, three runs: 95.7 / 102.0, 91.3 / 95.1, 87.1 / 88.7 ms. As written (9 passes), the kernels
    6.2-7.1 ms against the compute's 7.1-9.6 and the 7-pass form's 5.6-5.9 (the three in turn, 40 rounds, two
    runs); the whole step, three runs: 95.2 / 94.7, 108.6 / 106.2, 99.3 / 99.2 ms, within the runs' noise. The
    step written into the denominator's tensor instead of a new one (2026-12-02, the same 16 parameters, medians of
    21 blocks): 5.79 ms against 6.51, bit for bit the same."""
    if not (0.0 <= beta1 <= 1.0 and 0.0 <= beta2 <= 1.0) or b1p.numel() != 1 or b2p.numel() != 1:
        return None
    dtype = np.float32 if param.dtype.itemsize == 4 else np.float64
    with np.errstate(all="ignore"):  # (a beta power of 1 divides by 0 here as in the compute, which warns not)
        lr_t, epsilon_t, shrink = (np.asarray(s).item() for s in _adam_scales(
            np, *(np.array(x.tolist(), dtype) for x in (lr, b1p, b2p)), epsilon, coeff))
    m1 = ops.add_.Tensor(ops.mul.Scalar(m1, beta1), grad, alpha=1.0 - beta1)
    m2 = ops.add_.Tensor(ops.mul.Scalar(m2, beta2), ops.mul_.Tensor(ops.mul.Scalar(grad, 1.0 - beta2), grad))
    denominator = ops.add_.Scalar(ops.sqrt.default(m2), epsilon_t)
    start = ops.mul.Scalar(param, shrink) if coeff else param
    if start.shape == m1.shape == denominator.shape:  # (the step into the denominator's own new tensor, each
        param_out = ops.addcdiv.out(start, m1, denominator, value=-lr_t, out=denominator)  # element read first)
    else:  # (operands that broadcast: the step has a shape of its own)
        param_out = ops.addcdiv.default(start, m1, denominator, value=-lr_t)
    return param_out, m1, m2, ops.mul.Scalar(b1p, beta1), ops.mul.Scalar(b2p, beta2)


def _norm2(xp, x):
    return xp.sqrt(xp.sum(x * x))


def lamb(xp, param, grad, lr, m1, m2, b1p, b2p, *, beta1, beta2, epsilon, weight_decay):
    """Adam's bias-corrected direction plus weight decay, r, scaled by the trust ratio ||Param|| / ||r|| (1 when
    either norm is 0, as Paddle's lamb kernel does)."""
    m1 = beta1 * m1 + (1.0 - beta1) * grad
    m2 = beta2 * m2 + (1.0 - beta2) * grad * grad
    b1p_now, b2p_now = xp.reshape(b1p, ()), xp.reshape(b2p, ())  # (0-d, as ``_adam_scales``' are)
    r = (m1 / (1.0 - b1p_now)) / (xp.sqrt(m2 / (1.0 - b2p_now)) + epsilon) + weight_decay * param
    p_norm, r_norm = _norm2(xp, param), _norm2(xp, r)
    both = (p_norm > 0) & (r_norm > 0)
    one = xp.ones((), dtype=param.dtype)
    ratio = xp.where(both, p_norm / xp.where(both, r_norm, one), one)
    return param - (xp.reshape(lr, ()) * ratio) * r, m1, m2, b1p * beta1, b2p * beta2


def rmsprop(xp, param, grad, lr, mean_square, mean_grad, moment, *, rho, epsilon, momentum, centered):
    """torch.optim.RMSprop's update: epsilon added outside the root, the learning rate outside the moment."""
    mean_square = rho * mean_square + (1.0 - rho) * grad * grad
    if centered:
        mean_grad = rho * mean_grad + (1.0 - rho) * grad
        avg = xp.sqrt(mean_square - mean_grad * mean_grad) + epsilon
    else:
        avg = xp.sqrt(mean_square) + epsilon
    moment = momentum * moment + grad / avg
    return param - xp.reshape(lr, ()) * moment, mean_square, mean_grad, moment


def adagrad(xp, param, grad, lr, moment, *, epsilon):
    """The sum of squared gradients scales each coordinate's step."""
    moment = moment + grad * grad
    return param - xp.reshape(lr, ()) * grad / (xp.sqrt(moment) + epsilon), moment


def _norm64(xp, xs: tuple):
    """The norm of all of ``xs`` together: each one's sum of squares in float64, added in order."""
    return xp.sqrt(sum(xp.sum(w * w) for w in (xp.astype(x, xp.float64) for x in xs)))


def global_norm(xp, *xs):
    """sqrt of the sum of squares of every element of every X, in float64, rounded once to the first X's dtype."""
    return rounded(xp, _norm64(xp, xs), xs[0].dtype)


def clip_by_global_norm(xp, *xs, max_norm: float) -> list:
    """Every X times max_norm / max(norm, max_norm) (1 below max_norm, NaN with a NaN norm), in float64 and
    rounded once to its own dtype."""
    scale = max_norm / xp.maximum(_norm64(xp, xs), max_norm)
    return [rounded(xp, xp.astype(x, xp.float64) * scale, x.dtype) for x in xs]


_ADAM_INPUTS = ["Param", "Grad", "LearningRate", "Moment1", "Moment2", "Beta1Pow", "Beta2Pow"]
_ADAM_OUTPUTS = ["ParamOut", "Moment1Out", "Moment2Out", "Beta1PowOut", "Beta2PowOut"]
_ADAM_PAIRS = (("Param", "ParamOut"), ("Moment1", "Moment1Out"), ("Moment2", "Moment2Out"),
               ("Beta1Pow", "Beta1PowOut"), ("Beta2Pow", "Beta2PowOut"))
_ADAM_ATTRS = {"beta1": Attr("float", 0.9), "beta2": Attr("float", 0.999), "epsilon": Attr("float", 1e-8)}
_ADAM_DTYPES = _dtypes("Grad", "LearningRate", "Moment1", "Moment2", "Beta1Pow", "Beta2Pow")
"""adam, adamw and lamb share their slots and moments: one family of updates."""

SCHEMAS = (
    schema("sgd", ["Param", "Grad", "LearningRate"], ["ParamOut"], _same_as_param(("Param", "ParamOut")),
           doc="ParamOut = Param - LearningRate * Grad.", dtypes=_dtypes("Grad", "LearningRate"), compute=sgd),
    schema("momentum", ["Param", "Grad", "Velocity", "LearningRate"], ["ParamOut", "VelocityOut"],
           _same_as_param(("Param", "ParamOut"), ("Velocity", "VelocityOut")),
           {"mu": Attr("float", 0.9), "use_nesterov": Attr("bool", False)},
           doc="VelocityOut = mu * Velocity + Grad; ParamOut = Param - lr * VelocityOut "
               "(Nesterov: Param - lr * (Grad + mu * VelocityOut)).",
           dtypes=_dtypes("Grad", "Velocity", "LearningRate"), compute=momentum),
    schema("adam", _ADAM_INPUTS, _ADAM_OUTPUTS, _same_as_param(*_ADAM_PAIRS), _ADAM_ATTRS,
           doc="Adam (Kingma & Ba, 2015) with bias correction from the running beta powers.", dtypes=_ADAM_DTYPES,
           compute=adam, aten=adam_aten, aten_any_values=True),
    schema("rmsprop", ["Param", "Grad", "LearningRate", "MeanSquare", "MeanGrad", "Moment"],
           ["ParamOut", "MeanSquareOut", "MeanGradOut", "MomentOut"],
           _same_as_param(("Param", "ParamOut"), ("MeanSquare", "MeanSquareOut"), ("MeanGrad", "MeanGradOut"),
                          ("Moment", "MomentOut")),
           {"rho": Attr("float", 0.95), "epsilon": Attr("float", 1e-6), "momentum": Attr("float", 0.0),
            "centered": Attr("bool", False)},
           doc="MeanSquareOut = rho MeanSquare + (1 - rho) Grad^2; centered: MeanGradOut = rho MeanGrad + "
               "(1 - rho) Grad and the variance MeanSquareOut - MeanGradOut^2 replaces MeanSquareOut; "
               "MomentOut = momentum Moment + Grad / (sqrt(that) + epsilon); ParamOut = Param - lr MomentOut "
               "(torch.optim.RMSprop's order: epsilon outside the root, lr outside the moment).",
           dtypes=_dtypes("Grad", "LearningRate", "MeanSquare", "MeanGrad", "Moment"), compute=rmsprop),
    schema("adagrad", ["Param", "Grad", "LearningRate", "Moment"], ["ParamOut", "MomentOut"],
           _same_as_param(("Param", "ParamOut"), ("Moment", "MomentOut")), {"epsilon": Attr("float", 1e-6)},
           doc="MomentOut = Moment + Grad^2; ParamOut = Param - lr Grad / (sqrt(MomentOut) + epsilon).",
           dtypes=_dtypes("Grad", "LearningRate", "Moment"), compute=adagrad),
    schema("adamw", _ADAM_INPUTS, _ADAM_OUTPUTS, _same_as_param(*_ADAM_PAIRS),
           {**_ADAM_ATTRS, "coeff": Attr("float", 0.01)},
           doc="Decoupled weight decay (Loshchilov & Hutter, 2019): Param * (1 - lr coeff), then adam's step.",
           dtypes=_ADAM_DTYPES, compute=adam, aten=adam_aten, aten_any_values=True),
    schema("lamb", _ADAM_INPUTS, _ADAM_OUTPUTS, _same_as_param(*_ADAM_PAIRS),
           {**_ADAM_ATTRS, "epsilon": Attr("float", 1e-6), "weight_decay": Attr("float", 0.01)},
           doc="LAMB (You et al., 2020, Algorithm 2): r = adam's bias-corrected direction + weight_decay Param; "
               "ParamOut = Param - lr (||Param|| / ||r||) r, the ratio taken as 1 when either norm is 0.",
           dtypes=_ADAM_DTYPES, compute=lamb),
    schema("global_norm", [Slot("X", duplicable=True)], ["Out"], _global_norm,
           doc="sqrt(sum of squares of every element of every X): the norm gradient clipping uses.",
           dtypes={"X": FLOAT_DTYPES}, compute=global_norm, inputs_as_given=True),
    schema("clip_by_global_norm", [Slot("X", duplicable=True)], [Slot("Out", duplicable=True)], _clip_by_norm,
           {"max_norm": Attr("float")},
           doc="Every X scaled by max_norm / max(global_norm(X), max_norm), so their joint norm is <= max_norm.",
           dtypes={"X": FLOAT_DTYPES}, compute=clip_by_global_norm),
)


__all__ = ["SCHEMAS", "adagrad", "adam", "adam_aten", "clip_by_global_norm", "global_norm", "lamb", "momentum",
           "rmsprop",
           "sgd"]
