"""What the ONNX tests share: the optional packages (skipped only with a reason, never in CI), and running a
model in ONNX Runtime next to gradgen's executor with the tolerances the project promises."""
from __future__ import annotations

import importlib
import os

import numpy as np
import pytest

TOLERANCE = {"float64": 1e-10, "float32": 1e-5, "float16": 1e-3}
"""Relative and absolute tolerance of ONNX Runtime against gradgen's executor, by dtype."""


def require(module: str):
    """Import an optional package; without it, skip with a reason unless GRADGEN_REQUIRE_EXTRAS is set (CI sets it)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError:
        if os.environ.get("GRADGEN_REQUIRE_EXTRAS"):
            raise
        pytest.skip(f"'{module}' is not installed (pip install -e '.[onnx]'; CI sets GRADGEN_REQUIRE_EXTRAS)")


def run_ort(model, feed: dict) -> dict:
    """Run an ONNX model in ONNX Runtime's CPU provider; returns output name -> array."""
    ort = require("onnxruntime")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    wanted = {i.name for i in session.get_inputs()}
    outs = session.run(None, {k: np.asarray(v) for k, v in feed.items() if k in wanted})
    return {o.name: v for o, v in zip(session.get_outputs(), outs)}


def assert_close(got, want, what: str) -> None:
    """Same dtype, same shape, values within the dtype's tolerance (bools and ints exactly)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, want {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
    tol = TOLERANCE.get(want.dtype.name)
    if tol is None:
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=what)
