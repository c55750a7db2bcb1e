"""Running a random program on an engine and comparing what it gives with the reference interpreter's.

The rule (``mismatches``): the same dtype and shape for every fetched value; integers and booleans equal;
for floats, NaN exactly where the reference has NaN, each infinity where it has that infinity, and finite
values within ``TOLERANCE`` of the reference, relative to the largest finite magnitude of that value (so a
sum rounded in another order passes, a wrong element does not). An engine that raises where the reference
raises passes if both errors are gradgen's own; one raising alone is a mismatch.
"""
from __future__ import annotations

import numpy as np

from gradgen.framework import Executor, Scope
from gradgen.program.errors import GradgenError

from .random_programs import Built

__all__ = ["TOLERANCE", "initial_values", "mismatches", "run_on"]

TOLERANCE = {np.dtype("float64"): 1e-9, np.dtype("float32"): 1e-3, np.dtype("float16"): 1e-2}
"""Relative tolerance by dtype, scaled by the largest finite magnitude of the value compared."""


def initial_values(built: Built) -> dict[str, np.ndarray]:
    """Every persistable value a run of ``built`` starts from: its startup program's, run on the reference, and
    the parameters its pieces drew."""
    scope = Scope()
    Executor(backend="numpy").run(built.startup, scope=scope)
    values = {name: np.array(scope[name]) for name in scope}
    values.update(built.params)
    return values


def run_on(backend: str, built: Built, initial: dict[str, np.ndarray]) -> list | GradgenError:
    """The fetched values of one run of ``built`` from ``initial``, or the gradgen error it raised."""
    scope = Scope()
    for name, value in initial.items():
        scope.set(name, value.copy())
    try:
        with np.errstate(all="ignore"):
            return Executor(backend=backend).run(built.main, feed=built.feed, fetch_list=built.fetch, scope=scope)
    except GradgenError as e:
        return e


def _differs(name: str, want: np.ndarray, got) -> str | None:
    got = np.asarray(got)
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{name}: {got.dtype}{list(got.shape)}, reference {want.dtype}{list(want.shape)}"
    if want.dtype.kind != "f":
        bad = got != want
        return f"{name}: {int(bad.sum())} elements differ, e.g. {got[bad][:3]} for {want[bad][:3]}" if bad.any() else None
    nan_w, nan_g = np.isnan(want), np.isnan(got)
    if (nan_w != nan_g).any():
        at = np.flatnonzero(nan_w != nan_g)[:3]
        return f"{name}: NaN differs at {at}: {got.flat[at]} for {want.flat[at]}"
    inf_w = np.isinf(want)
    if (inf_w != np.isinf(got)).any() or (want[inf_w] != got[inf_w]).any():
        at = np.flatnonzero((inf_w != np.isinf(got)) | (np.isinf(want) & (want != got)))[:3]
        return f"{name}: infinities differ at {at}: {got.flat[at]} for {want.flat[at]}"
    finite = np.isfinite(want)
    if not finite.any():
        return None
    scale = max(1.0, float(np.max(np.abs(want[finite]))))
    error = np.abs(got[finite].astype(np.float64) - want[finite].astype(np.float64))
    tol = TOLERANCE[want.dtype] * scale
    if (error > tol).any():
        worst = int(np.argmax(error))
        return (f"{name}: off by {error[worst]:.3g} (tolerance {tol:.3g}): {got[finite][worst]!r} for "
                f"{want[finite][worst]!r}")
    return None


def mismatches(built: Built, reference, other) -> list[str]:
    """Every way ``other`` (one engine's result) differs from ``reference`` (the numpy engine's)."""
    if isinstance(reference, GradgenError) or isinstance(other, GradgenError):
        if isinstance(reference, GradgenError) and isinstance(other, GradgenError):
            return []
        which = "the reference" if isinstance(reference, GradgenError) else "the engine"
        error = reference if isinstance(reference, GradgenError) else other
        return [f"only {which} raised: {type(error).__name__}: {str(error)[:300]}"]
    found = []
    for name, want, got in zip(built.fetch, reference, other):
        problem = _differs(name, np.asarray(want), got)
        if problem is not None:
            found.append(problem)
    return found
