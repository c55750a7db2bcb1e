"""A numpy kernel kept beside its op's ``compute`` because it measures faster (``kernels.FASTER``) must give
the derived kernel's numbers bit for bit: NaN where it gives NaN, the sign of every zero, the dtype."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework.backend.numpy.kernels import FASTER, KERNELS
from gradgen.framework.backend.numpy.kernels.derived import derived_kernel
from gradgen.program import OP_SCHEMAS
from tests.framework.op_harness import Case, one_op_program

SPECIALS = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3.0e38, -3.0e38])


def _inputs(schema, dtype: str, shape: tuple, rng) -> dict:
    """Random values of ``shape`` for every input slot, every special value against every other included."""
    inputs = {}
    for k, slot in enumerate(s for s in schema.inputs if not s.optional):
        values = rng.standard_normal(shape)
        flat = values.reshape(-1)
        flat[: SPECIALS.size ** 2] = (np.repeat(SPECIALS, SPECIALS.size) if k == 0 else
                                      np.tile(SPECIALS, SPECIALS.size))[: flat.size]
        inputs[slot.name] = values.astype(dtype)
    return inputs


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    keep = ~np.isnan(want)
    np.testing.assert_array_equal(got[keep], want[keep])
    np.testing.assert_array_equal(np.signbit(got[keep]), np.signbit(want[keep]))


def test_faster_entries_name_ops_that_state_their_math():
    assert all(OP_SCHEMAS[t].compute is not None and KERNELS[t] is not derived_kernel for t in FASTER)


@pytest.mark.parametrize("op_type", sorted(FASTER))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(0,), (1,), (11, 11), (3, 5, 17)])
def test_faster_kernel_gives_the_derived_kernels_numbers(op_type, dtype, shape):
    schema, rng = OP_SCHEMAS[op_type], np.random.default_rng(sum(shape))
    inputs = _inputs(schema, dtype, shape, rng)
    _, op, feed = one_op_program(Case(op_type, inputs, None))
    arrays = [feed[op.input(s.name)[0]] for s in schema.inputs if op.input(s.name)]
    with np.errstate(all="ignore"):
        got, want = KERNELS[op_type](op)(*arrays), derived_kernel(schema)(op)(*arrays)
    for g, w in zip(*(r if isinstance(r, tuple) else (r,) for r in (got, want))):
        _same_bits(g, w)
