"""Every op: a kernel exists, it agrees with numpy, and it keeps the dtype and shape promise."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework.runtime.kernels import KERNELS
from tests.framework.op_cases import ALL_CASES
from tests.framework.op_harness import check_type_promise, run_case
from gradgen.program import OP_SCHEMAS
from gradgen.program import ops as program_ops

KERNEL_FAMILIES = ("creation", "elementwise", "activation", "linalg", "reduction", "manipulation", "logic", "nn")
"""Schema families whose kernels live in this package's family modules (grad and optimizer ops are tested by theirs)."""


def test_every_schema_has_a_kernel():
    missing = sorted(t for t in OP_SCHEMAS if t not in KERNELS)
    assert not missing, f"op types without a kernel: {missing}"


def test_every_kernel_has_a_schema():
    stray = sorted(t for t in KERNELS if t not in OP_SCHEMAS)
    assert not stray, f"kernels for unknown op types: {stray}"


def test_every_op_of_the_kernel_families_has_float32_and_float64_cases():
    covered: dict[str, set] = {}
    for case in ALL_CASES:
        dtypes = {str(np.asarray(v if not isinstance(v, list) else v[0]).dtype) for v in case.inputs.values()}
        dtypes |= {case.attrs["dtype"]} if "dtype" in case.attrs else set()
        covered.setdefault(case.op, set()).update(dtypes)
    families = [f for f in program_ops.FAMILIES if f.__name__.rsplit(".", 1)[-1] in KERNEL_FAMILIES]
    assert len(families) == len(KERNEL_FAMILIES)
    for family in families:
        for s in family.SCHEMAS:
            assert s.type in covered, f"no kernel test case for op '{s.type}'"
            assert {"float32", "float64"} <= covered[s.type], f"op '{s.type}' is tested only on {covered[s.type]}"


def _close(got, want, dtype):
    want = np.asarray(want)
    if got.dtype.kind in "biu" or want.dtype.kind == "b":
        np.testing.assert_array_equal(got, want)
    elif got.dtype == np.float32:
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.id)
def test_op_matches_numpy_and_keeps_its_type_promise(case):
    got, declared = run_case(case)
    check_type_promise(got, declared, case.op)
    want = case.expect({k: (v if not isinstance(v, list) else list(v)) for k, v in case.inputs.items()})
    if not isinstance(want, dict):
        want = {"Out": [want]}
    assert set(want) == set(got), f"{case.op}: outputs {sorted(got)}, expected {sorted(want)}"
    for slot, arrays in want.items():
        assert len(arrays) == len(got[slot])
        for g, w in zip(got[slot], arrays):
            assert g.shape == np.shape(w), f"{case.op} {slot}: shape {g.shape}, numpy gives {np.shape(w)}"
            _close(g, w, g.dtype)
