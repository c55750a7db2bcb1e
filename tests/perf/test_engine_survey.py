"""The engine survey times what it claims: the exported step is the same training step, fed back each step, and a
wrong or failing engine is reported, never timed as if it were right."""
from __future__ import annotations

import numpy as np

from tests.bench.engine_steps import make_engine_step
from tests.bench.engine_survey import DEFAULT_FOLDER, _wrong_losses, markdown
from tests.onnx.runtime import require


def test_the_exported_seed_step_in_onnx_runtime_takes_gradgen_numpys_steps(tmp_path):
    require("onnxruntime")
    ort_step = make_engine_step("ort", "seed", DEFAULT_FOLDER, 1, str(tmp_path))
    numpy_step = make_engine_step("numpy", "seed", DEFAULT_FOLDER, 1, str(tmp_path))
    ort_losses = [ort_step() for _ in range(4)]
    numpy_losses = [numpy_step() for _ in range(4)]
    np.testing.assert_allclose(ort_losses, numpy_losses, rtol=1e-5)
    assert len(set(ort_losses)) == 4, "the updated parameters were not fed back: every step saw the same weights"


def test_losses_beyond_the_tolerance_are_wrong_and_within_it_are_not():
    reference = [2.0, 1.5, 1.2]
    assert _wrong_losses([2.0 * (1 + 1e-5), 1.5, 1.2], reference) is None
    assert "differ" in _wrong_losses([2.0, 1.5 * (1 + 2e-4), 1.2], reference)
    assert _wrong_losses([5.0], None) is None


def test_the_table_gives_ratios_to_jax_and_names_every_failure():
    results = {"lenet": {"jax": {"ms": 10.0, "first_loss_s": 1.0, "version": "j"},
                         "ort": {"ms": 25.0, "first_loss_s": 2.0, "version": "o"},
                         "iree": {"error": "RuntimeError: iree-compile: no Loop"},
                         "openvino": {"error": "wrong answer: losses differ"}}}
    text = markdown(results, ["jax", "ort", "iree", "openvino"], ((1.0, 1.0, 1.0), (2.0, 2.0, 2.0)), "(test)")
    assert "| lenet | 10.00 (1.00x) | 25.00 (2.50x) | fails | wrong loss |" in text
    assert "- lenet on iree: RuntimeError: iree-compile: no Loop" in text
    assert "load average before (1.0, 1.0, 1.0), after (2.0, 2.0, 2.0)" in text
