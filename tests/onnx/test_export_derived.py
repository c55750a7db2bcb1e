"""Exports derived from the ops' own math (``tools/onnx/lower_derived``): the formula traced into ONNX nodes gives
in ONNX Runtime what the engines give, over the whole float line (infinities, NaN, signed zeros, huge values)."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.program import OP_SCHEMAS
from tests.framework.op_harness import Case, one_op_program
from tests.onnx.runtime import require, run_ort

SPECIALS = [0.0, -0.0, 0.5, -0.5, 3.0, -3.0, 40.0, -40.0, 750.0, -750.0, np.inf, -np.inf, np.nan]

COUNTERS = {"increment": {"step": -0.5}}

CHANNELWISE = {"conv2d": {"strides": [1], "paddings": [1], "dilations": [1]}}
"""Traced ops over N-C-spatial windows, with their attrs: each pair of special values meets as one channel of the
input (one element, padded on both sides) and that channel's 1-tap filter (groups = channels), so the padding's
zeros meet every filter value too."""
"""Traced ops whose input is a one-element counter, with their attrs: fed each special value alone."""

MADE = {"fill_constant": lambda dtype: {"shape": [2, 3], "dtype": dtype, "value": -0.0},
        "fill_any_like": lambda dtype: {"value": -0.0}}
"""Traced ops that make a tensor, with their attrs in ``dtype`` (``tests/backends/test_stated_once_creation.py``
runs them over every dtype and fill value)."""


def special_cases(op_type: str, dtype: str) -> list[Case]:
    """``op_type`` on every pair of special values (one case), or each value alone for a counter; none where the
    op does not take ``dtype``."""
    schema = OP_SCHEMAS[op_type]
    if not all(np.dtype(dtype).name in rule for rule in schema.dtypes.values() if not isinstance(rule, str)):
        return []
    grid = np.array(SPECIALS, dtype)
    if op_type in COUNTERS:
        return [Case(op_type, {"X": grid[k:k + 1]}, None, COUNTERS[op_type]) for k in range(len(grid))]
    first, second = (a.reshape(-1) for a in np.meshgrid(grid, grid))  # every pair of special values
    if op_type in CHANNELWISE:
        n = first.size
        return [Case(op_type, {"Input": first.reshape(1, n, 1), "Filter": second.reshape(n, 1, 1)}, None,
                     {**CHANNELWISE[op_type], "groups": n})]
    inputs = dict(zip((s.name for s in schema.inputs), (first, second)))
    attrs = MADE[op_type](dtype) if op_type in MADE else {"alpha": 0.3} if "alpha" in schema.attrs else {}
    return [Case(op_type, inputs, None, attrs)]


def _traced_ops() -> list[str]:
    require("onnx")
    from gradgen.framework.tools.onnx.export import OWN_EXPORTS
    from gradgen.framework.tools.onnx.lower_derived import NO_FLOAT64

    return sorted(t for t, s in OP_SCHEMAS.items() if s.compute is not None and t not in OWN_EXPORTS
                  and (not s.onnx or s.onnx in NO_FLOAT64))


def test_the_ops_whose_formula_is_traced_include_the_composites():
    assert {"softplus", "erf", "gelu", "gelu_grad", "silu", "elu", "relu_grad", "scale"} <= set(_traced_ops())


def test_an_op_with_math_keeps_a_hand_written_export_only_with_a_reason():
    require("onnx")
    from gradgen.framework.tools.onnx.export import LOWERINGS, OWN_EXPORTS

    assert all(OP_SCHEMAS[t].compute is not None and t in LOWERINGS and len(why) > 20
               for t, why in OWN_EXPORTS.items())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_traced_exports_agree_with_the_reference_on_special_values(dtype):
    from gradgen.framework import Executor, Scope, export_onnx

    for case in (c for op_type in _traced_ops() for c in special_cases(op_type, dtype)):
        op_type = case.op
        main, op, feed = one_op_program(case)
        fetch = [n for names in op.outputs.values() for n in names]
        with np.errstate(all="ignore"):
            (want,) = Executor(check_types=False).run(main, feed=feed, fetch_list=fetch, scope=Scope())
        got = run_ort(export_onnx(main, fetch_list=fetch, include_updates=False), feed)[fetch[0]]
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{op_type} {dtype}: NaN positions")
        keep = ~np.isnan(want)
        np.testing.assert_allclose(got[keep], want[keep], rtol=1e-5 if dtype == "float32" else 1e-12, atol=0,
                                   err_msg=f"{op_type} {dtype}")
