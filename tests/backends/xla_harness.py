"""Running a program on the xla backend beside the numpy one, for the backend tests."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import ExecutionError, Executor, Scope
from tests.extras import require

__all__ = ["assert_same", "need_jax", "run_both"]


def need_jax() -> None:
    try:
        import jax  # noqa: F401
    except ModuleNotFoundError:
        require("jax", "pip install -e '.[xla]'")


def run_both(main, feed: dict, fetch: list, params: dict | None = None):
    """(numpy's fetched arrays or its ExecutionError, xla's fetched arrays or its ExecutionError)."""
    results = []
    for backend in ("numpy", "xla"):
        scope = Scope()
        for name, value in (params or {}).items():
            scope.set(name, np.array(value))
        try:
            results.append(Executor(backend=backend).run(main, feed=feed, fetch_list=fetch, scope=scope))
        except ExecutionError as e:
            results.append(e)
    return results


def assert_same(want, got, names, what: str = "") -> None:
    """Same dtypes and shapes, values to float64 1e-12 (relative to the array's scale) or float32 1e-5."""
    if isinstance(want, Exception):
        assert isinstance(got, Exception), f"{what}: numpy raised {want}, xla returned {got}"
        return
    if isinstance(got, Exception):
        raise AssertionError(f"{what}: xla raised {got}") from got
    for name, w, g in zip(names, want, got):
        assert isinstance(g, np.ndarray), f"{what} {name}: {type(g).__name__}"
        assert g.dtype == w.dtype and g.shape == w.shape, \
            f"{what} {name}: xla {g.dtype}{list(g.shape)}, numpy {w.dtype}{list(w.shape)}"
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=f"{what} {name}")
            continue
        tol = 1e-12 if w.dtype == np.float64 else 1e-5
        finite = np.isfinite(w)
        np.testing.assert_array_equal(np.isfinite(g), finite, err_msg=f"{what} {name}: non-finite entries differ")
        np.testing.assert_array_equal(g[~finite], w[~finite], err_msg=f"{what} {name}: non-finite entries differ")
        scale = max(1.0, float(np.max(np.abs(w[finite]), initial=0.0)))
        np.testing.assert_allclose(g[finite], w[finite], rtol=tol, atol=tol * scale, err_msg=f"{what} {name}")

