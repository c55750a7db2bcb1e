"""ONNX's own backend node tests and the wheel's small whole models, through the importer and the executor.

The expected list (``node_tests_passing.txt``) is what ``python -m tests.onnx.conformance --write`` found;
a test on it that fails now is a regression, and a test that newly passes must be added (with the
design_docs table) so the published figures stay true.
"""
from __future__ import annotations

import pytest

from tests.onnx.runtime import require


@pytest.fixture(scope="module")
def outcomes():
    require("onnx")
    from tests.onnx.conformance import run_all

    return run_all(skip_slow=True)


def test_no_node_test_or_model_that_passed_before_fails_now(outcomes):
    from tests.onnx.conformance import SLOW_MODELS, expected_passing

    failing = {o.name: o.reason for o in outcomes if not o.passed}
    expected = [name for name in expected_passing() if name not in SLOW_MODELS]
    regressions = [f"{name}: {failing[name]}" for name in expected if name in failing]
    missing = [name for name in expected if name not in {o.name for o in outcomes}]
    assert not regressions, "regressions:\n" + "\n".join(regressions)
    assert not missing, f"expected tests no longer run (unsupported now?): {missing}"


def test_the_expected_list_is_up_to_date(outcomes):
    from tests.onnx.conformance import expected_passing

    new = sorted({o.name for o in outcomes if o.passed} - set(expected_passing()))
    assert not new, f"these now pass; run `python -m tests.onnx.conformance --write` to record them: {new}"


def test_every_failure_says_why(outcomes):
    assert all(o.reason for o in outcomes if not o.passed)


def test_the_design_doc_lists_the_ops_the_importer_has():
    require("onnx")
    from tests.onnx.conformance import DOC, OPS_END, OPS_START, supported_ops, with_generated

    with open(DOC) as f:
        doc = f.read()
    assert with_generated(doc, OPS_START, OPS_END, supported_ops()) == doc, (
        "stale: run `python -m tests.onnx.conformance --write`")
