"""The fused GEMM's library lookup: found wherever numpy's wheel bundles it, cleanly absent elsewhere."""
from __future__ import annotations

import glob
import os

import numpy as np

from gradgen.framework.runtime.blas import gemm
from gradgen.framework.runtime.plan import build_plan
from gradgen.program import Program, layers, program_guard
from gradgen.framework import optimizer


def test_gemm_is_bound_exactly_when_numpy_bundles_its_openblas():
    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    bundled = glob.glob(os.path.join(libs, "libscipy_openblas64_*.so"))
    assert (gemm is not None) == bool(bundled), (bundled, gemm)


def test_without_the_library_the_plan_keeps_plain_products(monkeypatch):
    import gradgen.framework.runtime.fusion as fusion

    monkeypatch.setattr(fusion, "gemm", None, raising=False)
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 4], "float64")
        w = layers.create_parameter([4, 3], "float64", name="w")
        loss = layers.reduce_sum(layers.square(x @ w))
        optimizer.SGD(0.1).minimize(loss)
    plan = build_plan(main.global_block(), ["x"], [loss.name])
    assert len(plan.steps) == len(main.global_block().ops)
