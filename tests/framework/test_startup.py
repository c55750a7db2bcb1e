"""The startup program: initializers give the same parameters on every run of a fixed seed."""
from __future__ import annotations

import math

import numpy as np

from gradgen.framework import Executor, Scope
from gradgen.program import Program, initializer, layers, program_guard

INITIALIZERS = {
    "c": initializer.Constant(0.25),
    "u": initializer.Uniform(-0.5, 2.0, seed=7),
    "n": initializer.Normal(1.0, 0.5, seed=11),
    "x": initializer.XavierUniform(),
}


def _startup(dtype="float64"):
    main, startup = Program(), Program()
    with program_guard(main, startup):
        for name, init in INITIALIZERS.items():
            layers.create_parameter([200, 50], dtype, name=name, initializer=init)
    return startup


def _run(startup) -> Scope:
    scope = Scope()
    Executor().run(startup, scope=scope)
    return scope


def test_startup_is_deterministic_across_runs_and_rebuilds():
    first = _run(_startup())
    again = _run(_startup())
    loaded = _run(Program.from_json(_startup().to_json()))
    for name in INITIALIZERS:
        np.testing.assert_array_equal(first[name], again[name])
        np.testing.assert_array_equal(first[name], loaded[name])


def test_initializers_follow_their_distributions():
    scope = _run(_startup())
    assert np.all(scope["c"] == 0.25)
    u = scope["u"]
    assert u.min() >= -0.5 and u.max() < 2.0 and abs(u.mean() - 0.75) < 0.05
    n = scope["n"]
    assert abs(n.mean() - 1.0) < 0.02 and abs(n.std() - 0.5) < 0.02
    limit = math.sqrt(6.0 / (200 + 50))
    x = scope["x"]
    assert np.abs(x).max() <= limit and np.abs(x).max() > 0.9 * limit


def test_initializer_values_match_numpy_pcg64():
    scope = _run(_startup())
    want = np.random.Generator(np.random.PCG64(7)).uniform(-0.5, 2.0, size=(200, 50))
    np.testing.assert_array_equal(scope["u"], want)


def test_startup_respects_dtype_and_distinct_seeds():
    scope = _run(_startup("float32"))
    assert all(scope[name].dtype == np.float32 for name in INITIALIZERS)
    main, startup = Program(), Program()
    with program_guard(main, startup):
        layers.create_parameter([10], "float64", name="a")
        layers.create_parameter([10], "float64", name="b")
    scope = _run(startup)
    assert not np.array_equal(scope["a"], scope["b"])
