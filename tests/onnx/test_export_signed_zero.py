"""A ``where`` that picks -0.0 exports as one ``Where`` node, which ONNX defines as a selection: ONNX's own
reference implementation keeps the zero's sign, as every gradgen engine does. ONNX Runtime 1.32's CPU ``Where``
returns +0.0 for a -0.0 taken from X (microsoft/onnxruntime#32191: its merge treats a selected -0.0 as "not
selected"); the export is not bent around that."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, export_onnx
from tests.framework.op_harness import Case, one_op_program
from tests.onnx.runtime import require


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_where_keeps_a_selected_negative_zero_in_onnxs_reference(dtype):
    require("onnx")
    from onnx.reference import ReferenceEvaluator

    condition = np.array([True, False, True, False])
    x, y = np.array([-0.0, 1.0, -0.0, 2.0], dtype), np.array([5.0, -0.0, 6.0, -0.0], dtype)
    main, op, feed = one_op_program(Case("where", {"Condition": condition, "X": x, "Y": y}, None, {}))
    fetch = op.output("Out")
    (want,) = Executor().run(main, feed=feed, fetch_list=fetch, scope=Scope())
    assert np.signbit(want).tolist() == [True, True, True, True]
    model = export_onnx(main, fetch_list=fetch, include_updates=False)
    assert [n.op_type for n in model.graph.node] == ["Where"]
    (got,) = ReferenceEvaluator(model).run(None, feed)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(got, want)
