"""The numeric contract every engine holds (``design_docs/numerics.md``), checked on each engine against an
oracle nobody here wrote: C99's pow through Python's ``math.pow``, IEEE 754 overflow through plain float64."""
from __future__ import annotations

import math

import numpy as np
import pytest

from gradgen.framework import Executor, Scope
from gradgen.program import Program, layers, program_guard
from tests.backends.xla_harness import need_jax

ENGINES = ("numpy", "xla")
SPECIAL = (0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5)
EXPONENTS = (0.5, -0.5, 2.0, 3.0, -1.0, -3.0, 0.0, -0.0, 1.0, 1 / 3, np.inf, -np.inf, np.nan)


def _run(engine: str, build, feed: dict) -> list:
    """Every value ``build(*vars of feed)`` returns, computed on ``engine`` in one run."""
    if engine != "numpy":
        need_jax()
    main = Program()
    with program_guard(main, Program()):
        xs = [layers.data(name, list(v.shape), str(v.dtype)) for name, v in feed.items()]
        outs = build(*xs)
    with np.errstate(all="ignore"):
        return Executor(backend=engine).run(main, feed=feed, fetch_list=outs, scope=Scope())


def c99_pow(x: float, y: float) -> float:
    """C99's pow (Annex F): Python's math.pow, which raises where C returns a pole or NaN."""
    try:
        return math.pow(x, y)
    except ValueError:
        if x == 0:  # a pole: 0 to a negative power
            odd = y == int(y) and int(y) % 2 == 1
            return math.copysign(math.inf, x) if odd else math.inf
        return math.nan  # a negative number to a non-integer power


def _assert_ieee_equal(got, want, what: str) -> None:
    """Equal as IEEE values in got's dtype: NaN where NaN, the same infinities and signs of zero, finite values to
    an ulp or two (float32's pow need not round as float64's rounded to float32 does)."""
    got = np.asarray(got)
    want = np.asarray(want, np.float64).astype(got.dtype)
    close = np.isclose(got, want, rtol=4 * np.finfo(got.dtype).eps, atol=0)
    same = close & (np.signbit(got) == np.signbit(want)) | np.isnan(got) & np.isnan(want)
    bad = np.flatnonzero(~same)
    assert not bad.size, f"{what}: got {got.flat[bad]} where C99 gives {want.flat[bad]} (at {bad})"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_pow_follows_c99_at_every_special_value(engine, dtype):
    """numpy's fast path for x ** 0.5 (its square root) once gave NaN at -inf and -0 at -0."""
    x = np.array(SPECIAL, dtype)
    feed = {"x": x, **{f"y{k}": np.full((1,) if k % 2 else x.shape, y, dtype) for k, y in enumerate(EXPONENTS)}}

    def build(x, *ys):  # x ** a number, and x ** a var broadcast from one element (numpy's fast path) or not
        return [layers.pow(x, y) for y in EXPONENTS] + [layers.pow(x, y) for y in ys]

    got = _run(engine, build, feed)
    for k, y in enumerate(EXPONENTS * 2):
        want = [c99_pow(float(a), y) for a in x]
        _assert_ieee_equal(got[k], want, f"{engine} pow(x, {y}{' as a var' if k >= len(EXPONENTS) else ''})")
