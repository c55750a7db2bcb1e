"""Finite-difference checks of generated gradients: the proof that a grad maker is right.

``numeric_gradient`` perturbs one var (a feed or a scope var) element by
element and differentiates a scalar target by central differences
(``numeric_gradients``: several targets from the same runs);
``check_gradients`` compares that with the gradient vars the backward pass
generated and reports the worst errors per var.

Every evaluation starts from the scope as it was when the check began: a
program that also updates state (a training program with optimizer ops,
batch norm's running statistics) would otherwise move its own parameters
between evaluations and compare gradients at different points.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, NamedTuple, Sequence

import numpy as np

from ..errors import ExecutionError
from ..runtime.executor import Executor
from ..runtime.scope import Scope

__all__ = ["Tolerances", "TOLERANCES", "tolerances_for", "numeric_gradients", "numeric_gradient", "GradReport",
           "relative_errors", "compare", "check_gradients"]


class Tolerances(NamedTuple):
    """Central-difference step and comparison tolerances for one floating-point dtype."""

    delta: float
    rtol: float
    atol: float


TOLERANCES = {
    "float64": Tolerances(1e-6, 1e-5, 1e-7),
    "float32": Tolerances(1e-3, 5e-2, 5e-3),
    "float16": Tolerances(1e-1, 1e-1, 1e-1),
}
"""By dtype: a step near the cube root of the dtype's epsilon (scaled), where truncation and rounding
errors of a central difference balance, and tolerances a few times that error."""


def tolerances_for(dtypes: Sequence[str]) -> Tolerances:
    """The tolerances of the least precise float dtype among ``dtypes`` (float64's when there is none)."""
    for dtype in ("float16", "float32"):
        if dtype in dtypes:
            return TOLERANCES[dtype]
    return TOLERANCES["float64"]


def _snapshot(scope: Scope) -> dict[str, np.ndarray]:
    return {name: np.array(scope[name], copy=True) for name in scope}


def _restore(scope: Scope, saved: dict[str, np.ndarray]) -> None:
    for name, value in saved.items():
        scope.set(name, value.copy())


def _target_values(exe: Executor, program, feed, scope: Scope, targets: Sequence[str],
                   saved: dict[str, np.ndarray] | None = None, wrt: str | None = None, value=None) -> list[float]:
    """The scalar ``targets``, evaluated in one run from the ``saved`` scope (with ``wrt`` set to ``value``)."""
    if saved is not None:
        _restore(scope, saved)
    if wrt is not None:
        scope.set(wrt, value)
    fetched = exe.run(program, feed=feed, fetch_list=list(targets), scope=scope)
    for target, got in zip(targets, fetched):
        if np.size(got) != 1:
            raise ExecutionError(f"gradient check: target '{target}' must be a scalar, got shape {np.shape(got)}")
    return [float(np.sum(got)) for got in fetched]


def numeric_gradients(program, feed: Mapping[str, np.ndarray], scope: Scope, targets: Sequence[str], wrt: str,
                      delta: float = 1e-6, executor: Executor | None = None,
                      on_element: Callable[[], None] | None = None) -> list[np.ndarray]:
    """d target / d wrt for each of ``targets`` by central differences, all from the same runs (one pair of runs
    per element of ``wrt``, a feed name or a var held in ``scope``).

    ``on_element`` is called after each element (a progress bar's update).
    """
    exe = executor or Executor()
    feed = {k: np.array(v, copy=True) for k, v in feed.items()}
    in_feed = wrt in feed
    saved = _snapshot(scope)
    base = feed[wrt] if in_feed else saved[wrt]
    grads = [np.zeros(base.shape, dtype=np.float64) for _ in targets]
    flat = base.reshape(-1)
    for i in range(flat.size):
        values = []
        for sign in (1.0, -1.0):
            x = base.copy()
            x.reshape(-1)[i] = flat[i] + sign * delta
            if in_feed:
                feed[wrt] = x
                values.append(_target_values(exe, program, feed, scope, targets, saved))
            else:
                values.append(_target_values(exe, program, feed, scope, targets, saved, wrt, x))
        for grad, plus, minus in zip(grads, *values):
            grad.reshape(-1)[i] = (plus - minus) / (2.0 * delta)
        if on_element is not None:
            on_element()
    _restore(scope, saved)
    return grads


def numeric_gradient(program, feed: Mapping[str, np.ndarray], scope: Scope, target: str, wrt: str,
                     delta: float = 1e-6, executor: Executor | None = None,
                     on_element: Callable[[], None] | None = None) -> np.ndarray:
    """d target / d wrt by central differences; ``wrt`` is a feed name or a var held in ``scope``."""
    return numeric_gradients(program, feed, scope, [target], wrt, delta, executor, on_element)[0]


@dataclass(frozen=True)
class GradReport:
    """How one generated gradient compares with finite differences."""

    var: str
    max_abs_error: float
    max_rel_error: float
    """The largest of ``relative_errors``: ``ok`` exactly when it is at most the rtol of the check."""
    ok: bool


def relative_errors(analytic: np.ndarray, numeric: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """``|analytic - numeric| / (|numeric| + atol / rtol)`` per element: at most ``rtol`` exactly when
    ``|analytic - numeric| <= atol + rtol * |numeric|`` (numpy's ``allclose`` rule), so the one number a check
    prints is the one it judges. Where ``|numeric|`` is well above ``atol / rtol`` this is the plain relative
    error; near zero, where a relative error means nothing, the floor ``atol / rtol`` lets ``atol`` rule.
    With ``rtol`` 0 only ``atol`` counts: 0 within it, infinite beyond it."""
    err = np.abs(analytic - numeric)
    if rtol <= 0:
        return np.where(err <= atol, 0.0, np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = err / (np.abs(numeric) + atol / rtol)
    return np.where(err == 0, 0.0, rel)  # 0 / 0 where both the gradient and atol are 0


def compare(var: str, analytic: np.ndarray, numeric: np.ndarray, rtol: float, atol: float) -> GradReport:
    """The report on one gradient: ``ok`` when every element's ``relative_errors`` is at most ``rtol``."""
    if analytic.shape != numeric.shape:
        return GradReport(var, float("inf"), float("inf"), False)
    err = np.abs(analytic - numeric)
    rel = relative_errors(analytic, numeric, rtol, atol)
    worst = float(rel.max(initial=0.0)) if not np.isnan(rel).any() else float("nan")
    return GradReport(var, float(err.max(initial=0.0)), worst, bool(np.all(rel <= rtol)))


def check_gradients(program, target: str, grads: Mapping[str, str], feed: Mapping[str, np.ndarray], scope: Scope,
                    delta: float = 1e-6, rtol: float = 1e-5, atol: float = 1e-7,
                    on_element: Callable[[], None] | None = None) -> list[GradReport]:
    """Compare each generated gradient ``grads[var]`` with d target / d var by central differences."""
    exe = Executor()
    names = list(grads)
    saved = _snapshot(scope)
    fetched = exe.run(program, feed=dict(feed), fetch_list=[grads[n] for n in names], scope=scope)
    _restore(scope, saved)
    reports = []
    for name, analytic in zip(names, fetched):
        numeric = numeric_gradient(program, feed, scope, target, name, delta, exe, on_element)
        reports.append(compare(name, np.asarray(analytic, dtype=np.float64), numeric, rtol, atol))
    return reports
