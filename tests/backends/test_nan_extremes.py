"""max and min over a slice holding NaN: the extreme is NaN, no element equals it, and its gradient and tangent
there are 0 / 0, NaN, on every engine (XLA once rewrote the product with the tie mask into 0)."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, forward_gradients, gradients
from gradgen.program import Program, layers, program_guard
from tests.backends.xla_harness import need_jax

X = np.array([[np.nan, 1.0, 2.0], [2.0, 3.0, 3.0], [-np.inf, -np.inf, 0.0]])


def _runs(build):
    need_jax()
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3, 3], "float64")
        x.stop_gradient = False
        fetch = build(x)
    with np.errstate(invalid="ignore", divide="ignore"):
        return [Executor(backend=b).run(main, feed={"x": X}, fetch_list=[fetch], scope=Scope())[0]
                for b in ("numpy", "xla")]


@pytest.mark.parametrize("reduce", ["reduce_max", "reduce_min"])
def test_the_gradient_is_nan_over_a_nan_slice_and_shared_among_ties_elsewhere(reduce):
    reference, compiled = _runs(lambda x: gradients([layers.reduce_sum(getattr(layers, reduce)(x, dim=[1]))],
                                                    [x])[0])
    assert np.isnan(reference[0]).all() and np.isnan(compiled[0]).all()
    np.testing.assert_array_equal(reference[1:], compiled[1:])
    want_row_1 = [0.0, 0.5, 0.5] if reduce == "reduce_max" else [1.0, 0.0, 0.0]
    np.testing.assert_array_equal(reference[1], want_row_1)


@pytest.mark.parametrize("reduce", ["reduce_max", "reduce_min"])
def test_the_tangent_is_nan_over_a_nan_slice(reduce):
    def build(x):
        ones = layers.fill_constant([3, 3], "float64", 1.0)
        (tangent,) = forward_gradients([getattr(layers, reduce)(x, dim=[1])], [x], [ones])
        return tangent

    reference, compiled = _runs(build)
    assert np.isnan(reference[0]) and np.isnan(compiled[0])
    np.testing.assert_array_equal(reference[1:], compiled[1:])
    np.testing.assert_array_equal(reference[1:], [1.0, 1.0])  # ties move by their mean tangent
