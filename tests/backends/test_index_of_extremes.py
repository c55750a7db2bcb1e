"""argmax and argmin on every engine against the numpy reference, over the whole input domain: NaN (the first
NaN wins, as numpy has it), inf and -inf, ties (the first index), ints, bools, size-1 and 0-d inputs, negative
axes, keep_dim. Their math is stated once (``program/ops/logic.py``); the engines derive it, and a derived
kernel once cast a float input to the declared int64 before comparing, so NaN and inf picked wrong indices
on xla and torch."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from gradgen.framework import Executor, Scope
from gradgen.program import Program, layers, program_guard
from tests.backends.xla_harness import need_jax

ENGINES = ["xla"] + (["torch"] if importlib.util.find_spec("torch") else [])

_FLOATS = np.array([[1.0, np.nan, 5.0, np.nan], [0.0, 0.0, 0.0, 0.0], [3.0, 2.0, np.inf, 0.0],
                    [-np.inf, -np.inf, -1.0, np.inf], [2.0, -0.0, 0.0, 2.0]])
INPUTS = {
    "float64": _FLOATS,
    "float32": _FLOATS.astype(np.float32),
    "int32": np.array([[1, 5, 5, 2], [0, 0, 0, 0], [3, 2, 1, 0], [-7, 9, 9, -7], [2, 2, 1, 3]], np.int32),
    "int64": np.array([[2 ** 40, -(2 ** 40), 2 ** 40, 0], [0, 0, 0, 0], [1, 2, 3, 4], [4, 3, 2, 1],
                       [-1, -1, -2, -2]], np.int64),
    "bool": np.array([[True, False, True, True], [False, False, True, False], [False] * 4, [True] * 4,
                      [False, True, False, True]]),
}


def _run(engine: str, value: np.ndarray, build) -> list:
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", list(value.shape), str(value.dtype))
        fetch = build(x)
    return Executor(backend=engine).run(main, feed={"x": value}, fetch_list=fetch, scope=Scope())


def _every_arg(x) -> list:
    axes = range(-len(x.shape), len(x.shape)) if x.shape else [0]
    return [getattr(layers, pick)(x, axis=axis, keep_dim=keep)
            for pick in ("argmax", "argmin") for axis in axes for keep in (False, True)]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", sorted(INPUTS))
def test_each_engine_picks_the_indices_numpy_picks(engine, dtype):
    need_jax()
    value = INPUTS[dtype]
    want = _run("numpy", value, _every_arg)
    got = _run(engine, value, _every_arg)
    for w, g in zip(want, got):
        assert g.dtype == np.int64 and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
    if dtype.startswith("float"):  # argmax along the last axis: the first NaN, then inf, then the first of ties
        assert want[2].tolist() == [1, 0, 2, 3, 0]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("shape", [(), (1,), (1, 3), (3, 1)])
def test_size_one_and_zero_d_inputs(engine, shape):
    need_jax()
    value = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)[::-1] if shape else np.array(7.0)
    want = _run("numpy", value, _every_arg)
    got = _run(engine, value, _every_arg)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g, w)
        assert g.shape == w.shape
