"""ONNX Runtime computes what the engines compute on infinities and NaN, for the exports where that took care:
``prod_others`` (reduce_prod's gradient) multiplies in the kernels' order, max pooling, its gradient and
``pool2d_select`` pick a window's first NaN without ArgMax and multiply by the 0/1 mask, and the convolutions and
their adjoints put NaN where the numpy kernels do (``numerics.md``). The round trip of the same exports is held by
``test_round_trip_every_export``; this runs the exported model itself."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope
from tests.framework.op_harness import Case, one_op_program
from tests.onnx.runtime import require, run_ort
from tests.onnx.test_export_ops import CASES
from tests.onnx.test_round_trip_every_export import assert_same

NON_FINITE = [np.inf, -np.inf, np.nan, 0.0, -0.0]
HUGE = {"float32": 1e30, "float64": 1e200}
"""A finite value whose square overflows in each dtype (the order of a product then matters)."""


def _ort_equals_numpy(case: Case) -> None:
    require("onnx")
    from gradgen.framework import export_onnx

    main, op, feed = one_op_program(case)
    fetch = [n for names in op.outputs.values() for n in names]
    with np.errstate(all="ignore"):
        want = Executor(backend="numpy").run(main, feed=feed, fetch_list=fetch, scope=Scope())
    got = run_ort(export_onnx(main, fetch_list=fetch), feed)
    for name, w in zip(fetch, want):
        assert_same(got[name], w, f"{case.id} {case.attrs}")


def _spoiled(case: Case, rng, values) -> Case:
    """``case`` with 1 to a quarter of each float input's elements replaced by ``values``."""
    def spoil(a):
        a = np.array(a)
        if a.dtype.kind != "f":
            return a
        flat = a.reshape(-1)
        at = rng.choice(flat.size, size=int(rng.integers(1, max(2, flat.size // 4))), replace=False)
        flat[at] = rng.choice(values, size=at.size)
        return a
    return Case(case.op, {k: spoil(v) for k, v in case.inputs.items()}, None, case.attrs, case.n_outputs, case.label)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("attrs", [{"dim": [1], "reduce_all": False},
                                   {"dim": [0, 2], "reduce_all": False},
                                   {"dim": [], "reduce_all": True}], ids=["one", "two", "all"])
def test_prod_others_overflows_where_the_kernels_do(dtype, attrs):
    """Each element's product of the others, in the kernels' order (x0 .. x(i-1), times x(n-1) .. x(i+1)): at
    [h, 5, h, 0] with h * h = inf the second is h * (0 * h) = 0, where the row's order gives inf * 0 = NaN."""
    h = HUGE[dtype]
    row = np.array([h, 5.0, h, 0.0, 2.0, -h], dtype)
    _ort_equals_numpy(Case("prod_others", {"X": np.tile(row, (2, 1)).reshape(2, 6, 1)}, None, attrs))
    rng = np.random.default_rng(0)
    grid = np.array(NON_FINITE + [h, -h, 1 / h, 2.0, 0.5, -3.0], dtype)
    for _ in range(8):
        _ort_equals_numpy(Case("prod_others", {"X": rng.choice(grid, size=(3, 5, 4))}, None, attrs))


def _cases(ops, **attrs):
    return [c for c in CASES if c.op in ops and all(c.attrs.get(k) == v for k, v in attrs.items())]


@pytest.mark.parametrize("op", ["pool2d", "pool2d_grad", "pool2d_select"])
def test_max_pooling_takes_a_windows_first_nan_and_spreads_non_finite_gradients(op):
    """A window holding a NaN is NaN (ONNX Runtime's MaxPool and ReduceMax skip it), its first NaN takes the
    gradient, and an infinite incoming gradient is NaN over the rest of its window (0 * inf), as the kernels."""
    cases = _cases({op}, pooling_type="max") if op != "pool2d_select" else _cases({op})
    assert len(cases) >= 5
    rng = np.random.default_rng(1)
    for case in cases:
        for _ in range(3):
            _ort_equals_numpy(_spoiled(case, rng, NON_FINITE))


@pytest.mark.parametrize("op", ["conv2d", "conv2d_input_grad", "conv2d_filter_grad", "conv2d_transpose"])
def test_convolutions_put_nan_where_the_kernels_do(op):
    """Infinities and NaN in the input, the filter and the output gradient (1 to 3 spatial dims, strides,
    paddings, dilations, groups): the adjoints have no products with padding, the filter gradient and the
    output do (``numerics.md``, rule 5). Huge finite values are left out: ONNX Runtime's float32 products go
    through fused multiply-adds, where an overflowing product meets an infinite sum without overflowing."""
    cases = _cases({op})
    assert len(cases) >= 5
    rng = np.random.default_rng(2)
    for case in cases:
        for _ in range(3):
            _ort_equals_numpy(_spoiled(case, rng, NON_FINITE))
