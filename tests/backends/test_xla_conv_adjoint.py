"""The xla engine's input gradient and transposed convolution (``backend/xla/lowerings/conv.py``): the shapes
where XLA's compiler aborted the process run, in a subprocess so that an abort fails this test instead of ending
the run, and give numpy's values; infinities and NaN in the filter and the output gradient land where the numpy
kernel, the exact adjoint, puts them (``numerics.md``, rule 5), in the filter gradient too."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gradgen.framework import Executor, Scope
from tests.backends.xla_harness import need_jax
from tests.framework.op_harness import Case, one_op_program
from tests.onnx.test_export_ops import CASES

ABORTED = [  # (x, filter, strides, paddings): XLA's operand swap kept a dim of kernel 2, stride 2, padding 1
    ([2, 2, 5, 4, 3], [4, 2, 3, 2, 3], [2, 2, 2], [1, 1, 1]),
    ([2, 2, 4, 2], [4, 2, 2, 3], [2, 1], [1, 1]),
    ([1, 4, 6, 2, 6], [4, 2, 2, 1, 3], [2, 2, 2], [1, 0, 0]),  # with groups
]
RUN_ALL = """
import sys, numpy as np
from gradgen.framework import Executor, Scope
from tests.backends.test_xla_conv_adjoint import ABORTED, case
for k in range(len(ABORTED)):
    main, op, feed = case(k)
    got = Executor(backend="xla").run(main, feed=feed, fetch_list=op.output("Input@GRAD"), scope=Scope())[0]
    np.save(f"{sys.argv[1]}/{k}.npy", got)
"""


def case(k: int):
    """The one-op program of the ``k``-th aborting input gradient (groups 2 when the channels allow), random
    values."""
    x, w, strides, pads = ABORTED[k]
    rng = np.random.default_rng(k)
    groups = x[1] // w[1]
    n_out = [(n + 2 * p - f) // s + 1 for n, f, s, p in zip(x[2:], w[2:], strides, pads)]
    attrs = {"strides": strides, "paddings": pads, "dilations": [1] * len(strides), "groups": groups}
    inputs = {"Filter": rng.standard_normal(w), "Output@GRAD": rng.standard_normal([x[0], w[0], *n_out]),
              "Input": np.zeros(x)}
    return one_op_program(Case("conv2d_input_grad", inputs, None, attrs))


def test_the_input_gradients_xla_aborted_on_run_and_equal_numpy(tmp_path):
    """All of them in one subprocess (an abort is its exit status -6, SIGABRT)."""
    need_jax()
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", RUN_ALL, str(tmp_path)], cwd=root, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    for k in range(len(ABORTED)):
        main, op, feed = case(k)
        (want,) = Executor(backend="numpy").run(main, feed=feed, fetch_list=op.output("Input@GRAD"), scope=Scope())
        np.testing.assert_allclose(np.load(tmp_path / f"{k}.npy"), want, rtol=1e-12, atol=1e-12, err_msg=str(k))


def test_an_aborting_shape_is_recognised_and_a_common_one_is_not():
    """The static test that keeps a convolution from XLA: each aborting case; not a 3x3 stride-1 or stride-2
    convolution with padding 1, a 1x1 one, or a patchify stem (kernel 4, stride 4, no padding)."""
    need_jax()
    from gradgen.framework.backend.xla.lowerings.conv import Window, _swap_aborts

    def window(op):
        return Window(*(op.attr(name) for name in Window._fields))

    for k in range(len(ABORTED)):
        _, op, feed = case(k)
        assert _swap_aborts(window(op), feed["in_Filter_0"].shape, feed["in_Input_0"].shape[2:])
    for kernel, stride, pad, size in [(3, 1, 1, 32), (3, 2, 1, 32), (1, 1, 0, 8), (1, 2, 0, 8), (4, 4, 0, 32)]:
        attrs = {"strides": [stride] * 2, "paddings": [pad] * 2, "dilations": [1, 1], "groups": 1}
        c = Case("conv2d_input_grad", {"Filter": np.ones((2, 2, kernel, kernel)),
                                       "Output@GRAD": np.ones((1, 2, 1, 1)), "Input": np.ones((1, 2, 1, 1))}, None,
                 attrs)
        _, op, _ = one_op_program(c)
        assert not _swap_aborts(window(op), (2, 2, kernel, kernel), (size, size))


NON_FINITE = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0])


@pytest.mark.parametrize("op_type, dtype", [("conv2d_input_grad", "float64"), ("conv2d_transpose", "float32"),
                                            ("conv2d_filter_grad", "float32")])
def test_non_finite_filters_and_gradients_give_numpys_nan(op_type, dtype):
    """Every input gradient, transposed convolution and filter gradient case (1 to 3 spatial dims, strides,
    paddings, dilations, groups), five times with 1 to a quarter of each input's elements infinite, NaN or zero:
    XLA's transposed convolution multiplied an infinite filter by the zeros between and around the gradient, and
    with groups an infinite gradient by the zeros of other groups' filters; its grouped filter gradient did the
    same with the input and the gradient (NaN where the adjoint has none; float32 only there). One dtype each:
    every case is a compile."""
    need_jax()
    rng = np.random.default_rng(3)
    cases = [c for c in CASES if c.op == op_type and c.inputs["Filter"].dtype == dtype]
    assert len(cases) >= 5
    for base in cases:
        main, op, feed = one_op_program(base)
        fetch = [n for names in op.outputs.values() for n in names]
        xla = Executor(backend="xla")
        for _ in range(4):
            spoiled = {}
            for name, value in feed.items():
                value = np.array(value)
                flat = value.reshape(-1)
                at = rng.choice(flat.size, size=int(rng.integers(1, max(2, flat.size // 4))), replace=False)
                flat[at] = rng.choice(NON_FINITE, size=at.size)
                spoiled[name] = value
            with np.errstate(all="ignore"):
                (want,) = Executor(backend="numpy").run(main, feed=spoiled, fetch_list=fetch, scope=Scope())
                (got,) = xla.run(main, feed=spoiled, fetch_list=fetch, scope=Scope())
            what = f"{base.id} {base.attrs}"
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{what}: NaN elsewhere")
            finite = np.isfinite(want)
            np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)], what)
            tol = 1e-5 if want.dtype == np.float32 else 1e-12
            np.testing.assert_allclose(got[finite], want[finite], rtol=tol, atol=tol * np.abs(want[finite]).max(
                initial=1.0), err_msg=what)
