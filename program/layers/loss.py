"""The loss helpers a Paddle user reaches for, built from ordinary ops (``accuracy`` is an op: ``metrics.py``).

Each is a composition of differentiable ops (subtract, square, abs, minimum,
log, reductions), so its gradients of every order are those ops' gradients.
Elementwise losses keep the input's shape (reduce them with ``mean``);
``mse_loss`` and ``l1_loss`` reduce as ``reduction`` says; ``smooth_l1``
sums each example's row into ``[N, 1]``, as Paddle's does.
"""
from __future__ import annotations

from ..dtypes import is_float
from ..errors import ProgramError
from ..variable import Variable
from .helper import check_var
from .manipulation import reshape
from .naming import named
from .math import abs, log, minimum, multiply, scale, square, subtract
from .reduction import mean, reduce_sum

REDUCTIONS = ("mean", "sum", "none")


def _floats(loss: str, input: Variable, label: Variable) -> tuple[Variable, Variable]:
    """input and label, which must be float vars: a loss of ints would round (Paddle refuses them too)."""
    for what, v in (("input", input), ("label", label)):
        if not is_float(check_var(v, what).dtype):
            raise ProgramError(f"{loss}: {what} '{v.name}' is {v.type_str()}, but a loss needs float tensors; "
                               "cast it first")
    return input, label


def _residual(input: Variable, label: Variable, loss: str) -> Variable:
    return subtract(*_floats(loss, input, label))


def _reduce(x: Variable, reduction: str, name) -> Variable:
    if reduction not in REDUCTIONS:
        raise ProgramError(f"reduction must be one of {', '.join(REDUCTIONS)}, got {reduction!r}")
    if reduction == "mean":
        return mean(x, name=name)
    return reduce_sum(x, name=name) if reduction == "sum" else x


@named
def square_error_cost(input: Variable, label: Variable, name=None) -> Variable:
    """(input - label)^2 per element (broadcasting), as Paddle's ``square_error_cost``."""
    return square(_residual(input, label, "square_error_cost"), name=name)


@named
def mse_loss(input: Variable, label: Variable, reduction: str = "mean", name=None) -> Variable:
    """The mean (or sum, or none) of (input - label)^2."""
    return _reduce(square(_residual(input, label, "mse_loss")), reduction, name)


@named
def l1_loss(input: Variable, label: Variable, reduction: str = "mean", name=None) -> Variable:
    """The mean (or sum, or none) of |input - label|."""
    return _reduce(abs(_residual(input, label, "l1_loss")), reduction, name)


def _huber(r: Variable, delta: float) -> Variable:
    """0.5 r^2 where |r| <= delta, else delta (|r| - delta / 2).

    Written as 0.5 q^2 + delta (|r| - q) with q = min(|r|, delta): one expression, no branch, continuous slope.
    """
    if not delta > 0:
        raise ProgramError(f"delta must be positive, got {delta}")
    a = abs(r)
    q = minimum(a, delta)
    return scale(square(q), 0.5) + scale(a - q, float(delta))


@named
def huber_loss(input: Variable, label: Variable, delta: float = 1.0, name=None) -> Variable:
    """Huber's loss of the residual label - input per element: quadratic within ``delta``, linear beyond."""
    return scale(_huber(subtract(*_floats("huber_loss", input, label)[::-1]), float(delta)), 1.0, name=name)


@named
def smooth_l1(x: Variable, y: Variable, inside_weight: Variable | None = None,
              outside_weight: Variable | None = None, sigma: float = 1.0, name=None) -> Variable:
    """Paddle's ``smooth_l1``: per element 0.5 (sigma r)^2 if |r| < 1/sigma^2 else |r| - 0.5/sigma^2, with
    r = inside_weight * (x - y), times outside_weight, summed over every axis but the first: ``[N, 1]``."""
    check_var(x, "x")
    if len(x.shape) < 1:
        raise ProgramError(f"smooth_l1 needs a batch axis, got '{x.name}' {x.type_str()}")
    r = _residual(x, y, "smooth_l1")
    if inside_weight is not None:
        r = multiply(r, check_var(inside_weight, "inside_weight"))
    per_element = scale(_huber(r, 1.0 / float(sigma) ** 2), float(sigma) ** 2)
    if outside_weight is not None:
        per_element = multiply(per_element, check_var(outside_weight, "outside_weight"))
    rows = reduce_sum(per_element, dim=list(range(1, len(x.shape)))) if len(x.shape) > 1 else per_element
    return reshape(rows, [-1, 1], name=name)


@named
def log_loss(input: Variable, label: Variable, epsilon: float = 1e-4, name=None) -> Variable:
    """-label log(input + eps) - (1 - label) log(1 - input + eps) per element: input is a probability."""
    check_var(input, "input")
    check_var(label, "label")
    positive = multiply(label, log(scale(input, 1.0, epsilon)))
    negative = multiply(scale(label, -1.0, 1.0), log(scale(input, -1.0, 1.0 + epsilon)))
    return scale(positive + negative, -1.0, name=name)


__all__ = ["REDUCTIONS", "square_error_cost", "mse_loss", "l1_loss", "huber_loss", "smooth_l1", "log_loss"]
