"""Generated code (regions and fused elementwise loops) computes exactly what the numpy kernels compute,
IEEE semantics included: x / 0 is inf or nan (never ZeroDivisionError), the mean of nothing is nan, NaN
and inf propagate through max/min/relu as numpy's do."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gradgen.framework import Executor, Scope, append_backward
from gradgen.framework.backend.numpy import jit
from gradgen.framework.backend.numpy.plan_data import PlanOptions
from gradgen.program import Program, layers, program_guard
from gradgen.program.initializer import Constant
from tests.extras import require

REGIONS = PlanOptions(warm_runs=0, background_compile=False)
PLAIN = PlanOptions(regions=False)
SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -3.0, np.nan, np.inf, -np.inf, 1e300, 1e-300])
UNARY = {"relu": layers.relu, "tanh": layers.tanh, "exp": layers.exp, "square": layers.square, "abs": layers.abs,
         "scale": lambda t: layers.scale(t, scale=-2.0, bias=0.5), "sigmoid": layers.sigmoid}
BINARY = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
          "div": layers.divide, "max": layers.maximum, "min": layers.minimum}


@pytest.fixture(autouse=True)
def _numba():
    require(None if jit.AVAILABLE else "numba", "pip install gradgen[fast]")


def _run(main, options, feeds, fetch):
    """Each feed in turn through one executor (the first run compiles), every result as fetched."""
    exe = Executor(options=options, check_types=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [exe.run(main, feed=feed, fetch_list=fetch) for feed in feeds]
    assert not [w for w in caught if "cannot compile" in str(w.message)]
    steps = exe.plan_for(main, list(feeds[0]), [v.name for v in fetch]).steps
    return results, [fn for s in steps if len(s.ops) > 1 for fn in [_generated(s.fn)] if fn is not None]


def _generated(fn):
    """The region or fused-loop runner inside step function ``fn`` (a plan buffer's wrapper may hold it)."""
    if hasattr(fn, "compiled"):
        return fn
    cells = [c.cell_contents for c in fn.__closure__ or ()]
    return next((c for c in cells if callable(c) and hasattr(c, "compiled")), None)


def _assert_same(got, want, dtype):
    tol = 1e-12 if dtype == "float64" else 1e-5
    for got_run, want_run in zip(got, want):
        for g, w in zip(got_run, want_run):
            assert g.shape == w.shape and g.dtype == w.dtype
            finite = np.isfinite(w)
            np.testing.assert_array_equal(np.isnan(g), np.isnan(w))  # the same NaNs
            np.testing.assert_array_equal(g[~finite & ~np.isnan(w)], w[~finite & ~np.isnan(w)])  # the same infs
            np.testing.assert_allclose(g[finite], w[finite], rtol=tol, atol=tol)


def _tanh_of_ratio():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 4], "float64")
        y = layers.data("y", [-1, 4], "float64")
        out = layers.scale(layers.tanh(x / y), 2.0)
        mean = layers.reduce_mean(layers.tanh(x))
    return main, [out, mean]


def test_division_by_zero_and_the_mean_of_an_empty_batch_are_numpys():
    """Three warm runs on ones; then a 0x4 batch (the mean of nothing is nan) and y = 0 (x / 0 is inf)."""
    main, fetch = _tanh_of_ratio()
    ones = {"x": np.ones((3, 4)), "y": np.ones((3, 4))}
    feeds = [ones, ones, ones, {"x": np.ones((0, 4)), "y": np.ones((0, 4))},
             {"x": np.ones((2, 4)), "y": np.zeros((2, 4))}]
    with np.errstate(all="ignore"):
        got, compiled = _run(main, REGIONS, feeds, fetch)
        want, _ = _run(main, PLAIN, feeds, fetch)
    assert compiled and all(fn.compiled() for fn in compiled)
    assert np.isnan(got[3][1]) and np.array_equal(got[4][0], np.full((2, 4), 2.0))
    _assert_same(got, want, "float64")


def _random_program(choices, dtype):
    """x * w, then ops on the values made so far, the last one plus x * w, its sum and mean, w's gradient."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 4], dtype)
        y = layers.data("y", [-1, 4], dtype)
        w = layers.create_parameter([4], dtype, name="w", initializer=Constant(0.5))
        values = [x * w, y]
        for kind, a, b in choices:
            pick = lambda k: values[k % len(values)]  # noqa: E731
            values.append(UNARY[kind](pick(a)) if kind in UNARY else BINARY[kind](pick(a), pick(b)))
        last = values[-1] + values[0]  # w reaches the loss
        total, mean = layers.reduce_sum(last), layers.reduce_mean(last)
        (_, grad), = append_backward(total, parameter_list=["w"])
    return main, startup, [last, total, mean, grad]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(choices=st.lists(st.tuples(st.sampled_from(sorted(UNARY) + sorted(BINARY)), st.integers(0, 20),
                                  st.integers(0, 20)), min_size=2, max_size=6),
       dtype=st.sampled_from(["float64", "float32"]), batches=st.lists(st.sampled_from([0, 1, 3]), min_size=2, max_size=3), seed=st.integers(0, 2 ** 16))
def test_generated_code_and_kernels_agree_on_zeros_nans_infs_and_empty_batches(choices, dtype, batches, seed):
    main, startup, fetch = _random_program(choices, dtype)
    rng = np.random.default_rng(seed)
    with np.errstate(over="ignore"):  # 1e300 becomes inf in float32: one more special value
        feeds = [{n: rng.choice(SPECIAL, (rows, 4)).astype(dtype) for n in ("x", "y")} for rows in batches]
    runs = []
    with np.errstate(all="ignore"):
        for opts in (REGIONS, PLAIN):
            scope = Scope()
            Executor().run(startup, scope=scope)
            exe = Executor(options=opts, check_types=False)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                runs.append([exe.run(main, feed=feed, fetch_list=fetch, scope=scope) for feed in feeds])
            assert not [w for w in caught if "cannot compile" in str(w.message)]
    _assert_same(runs[0], runs[1], dtype)
