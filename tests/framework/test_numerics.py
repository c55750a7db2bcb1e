"""Kernels stay finite where the math is: extreme logits for softmax, cross-entropy, sigmoid."""
from __future__ import annotations

import numpy as np
import pytest

from tests.framework.op_harness import Case, run_case

EXTREME = np.array([[1000.0, 0.0, -1000.0], [-800.0, -800.0, -801.0]])


def _out(case, slot="Out"):
    got, _ = run_case(case)
    return got[slot][0]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_and_log_softmax_do_not_overflow(dtype):
    x = EXTREME.astype(dtype)
    p = _out(Case("softmax", {"X": x}, None, {"axis": -1}))
    assert np.all(np.isfinite(p))
    np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(p[0], [1.0, 0.0, 0.0])
    log_p = _out(Case("log_softmax", {"X": x}, None, {"axis": -1}))
    assert np.all(np.isfinite(log_p))
    np.testing.assert_allclose(log_p[0], [0.0, -1000.0, -2000.0], rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_cross_entropy_from_logits_is_finite(dtype):
    label = np.array([[2], [1]], dtype=np.int64)
    got, _ = run_case(Case("softmax_with_cross_entropy", {"Logits": EXTREME.astype(dtype), "Label": label}, None))
    loss = got["Loss"][0]
    assert np.all(np.isfinite(loss))
    np.testing.assert_allclose(loss[0, 0], 2000.0, rtol=1e-6)  # log(softmax) underflows; log-sum-exp does not
    np.testing.assert_allclose(loss[1, 0], np.log(2 + np.exp(-1.0)), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sigmoid_cross_entropy_with_extreme_logits(dtype):
    x = np.array([1000.0, -1000.0, 0.0], dtype)
    z = np.array([0.0, 1.0, 0.5], dtype)
    out = _out(Case("sigmoid_cross_entropy_with_logits", {"X": x, "Label": z}, None))
    np.testing.assert_allclose(out, [1000.0, 1000.0, np.log(2.0)], rtol=1e-6)


def test_sigmoid_and_softplus_are_finite_for_large_inputs():
    x = np.array([-1000.0, 0.0, 1000.0])
    np.testing.assert_allclose(_out(Case("sigmoid", {"X": x}, None)), [0.0, 0.5, 1.0])
    np.testing.assert_allclose(_out(Case("softplus", {"X": x}, None)), [0.0, np.log(2.0), 1000.0])
