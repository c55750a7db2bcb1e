"""The bench's MLP systems compute the same thing, so their timings compare like with like."""
from __future__ import annotations

import numpy as np
import pytest

from tests.bench.steps import make_step


@pytest.mark.parametrize("case", ["seed-f64", "seed-f32"])
def test_gradgen_and_the_numpy_loop_take_the_same_steps_from_the_same_data(case):
    gradgen, numpy_loop = make_step("gradgen", case), make_step("numpy", case)
    for _ in range(3):
        (loss,) = gradgen()
        np.testing.assert_allclose(float(loss), numpy_loop(), rtol=1e-9 if case.endswith("f64") else 1e-4)


@pytest.mark.parametrize("case", ["seed-f64", "seed-f32"])
def test_the_two_gemm_floors_write_the_same_products(case):
    tol = 1e-12 if case.endswith("f64") else 2e-5
    for ours, numpys in zip(make_step("provider_gemms", case)(), make_step("numpy_gemms", case)()):
        np.testing.assert_allclose(ours, numpys, rtol=tol, atol=tol * np.abs(numpys).max())
