"""A numpy kernel kept beside its op's ``compute`` because it measures faster (``kernels.FASTER``) must give
the derived kernel's numbers bit for bit: NaN where it gives NaN, the sign of every zero, the dtype. Batch norm's
kernels sum in another order (einsum) than its compute, so they agree to rounding instead, over the domain a
channel's statistics meet: empty batches, one value per channel, is_test, NaN and inf, float16."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework.backend.numpy.kernels import FASTER, KERNELS, XP
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


SUMMING = {"batch_norm", "batch_norm_grad"}
"""FASTER kernels that sum in another order than their op's compute: checked to rounding below."""


MADE = {"fill_constant", "cast"}
"""FASTER kernels of ops that take required attrs (a shape, a dtype): checked over every dtype and the values no
integer holds in ``tests/backends/test_stated_once_creation.py``."""


INDEXED = {"gather", "gather_grad", "slice_grad"}
"""FASTER kernels of ops that take an index or slicing attrs: checked on their domain's edges (negative indices and
strides, indices out of bounds, repeats) in ``tests/backends/test_stated_once_indexing_rest.py``."""


@pytest.mark.parametrize("op_type", sorted(set(FASTER) - SUMMING - MADE - INDEXED))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(0,), (1,), (11, 11), (3, 5, 17)])
def test_faster_kernel_gives_the_derived_kernels_numbers(op_type, dtype, shape):
    schema, rng = OP_SCHEMAS[op_type], np.random.default_rng(sum(shape))
    inputs = _inputs(schema, dtype, shape, rng)
    _, op, feed = one_op_program(Case(op_type, inputs, None))
    arrays = [feed[op.input(s.name)[0]] for s in schema.inputs if op.input(s.name)]
    with np.errstate(all="ignore"):
        got, want = KERNELS[op_type](op)(*arrays), derived_kernel(schema, XP)(op)(*arrays)
    for g, w in zip(*(r if isinstance(r, tuple) else (r,) for r in (got, want))):
        _same_bits(g, w)


def _close(got: np.ndarray, want: np.ndarray, dtype: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    tol = {"float16": 2e-3, "float32": 2e-5, "float64": 1e-12}[dtype]
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def _batch_norm_inputs(op_type: str, dtype: str, shape: tuple, rng, special: bool) -> dict:
    c = shape[1]
    x = rng.standard_normal(shape) * 3 + 1
    if special and x.size:
        x.reshape(-1)[:3] = [np.nan, np.inf, -np.inf][: x.size]
    per_channel = lambda: rng.standard_normal(c).astype(dtype)
    if op_type == "batch_norm":
        return {"X": x.astype(dtype), "Scale": per_channel(), "Bias": per_channel(), "Mean": per_channel(),
                "Variance": (np.abs(rng.standard_normal(c)) + 0.5).astype(dtype)}
    return {"X": x.astype(dtype), "Scale": per_channel(), "Mean": per_channel(),
            "Variance": (np.abs(rng.standard_normal(c)) + 0.5).astype(dtype),
            "Y@GRAD": rng.standard_normal(shape).astype(dtype)}


@pytest.mark.parametrize("op_type", sorted(SUMMING))
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("shape", [(0, 3), (4, 3), (1, 3), (1, 3, 1, 1), (2, 5, 0, 4), (5, 2, 3, 7), (8, 4, 6)])
@pytest.mark.parametrize("is_test", [False, True])
@pytest.mark.parametrize("special", [False, True])
def test_batch_norm_kernels_give_the_computes_numbers_to_rounding(op_type, dtype, shape, is_test, special):
    rng = np.random.default_rng(sum(shape) + is_test)
    inputs = _batch_norm_inputs(op_type, dtype, shape, rng, special)
    attrs = {"is_test": is_test, "epsilon": 1e-3}
    if op_type == "batch_norm":
        attrs.update(momentum=0.75, running_variance="population" if shape[0] == 1 else "unbiased")
    elif not is_test:  # in training the gradient reads the batch's statistics, not the running ones
        inputs = {k: v for k, v in inputs.items() if k not in ("Mean", "Variance")}
    _, op, feed = one_op_program(Case(op_type, inputs, None, attrs=attrs))
    schema = OP_SCHEMAS[op_type]
    arrays = [feed[op.input(s.name)[0]] for s in schema.inputs if op.input(s.name)]
    with np.errstate(all="ignore"):
        got, want = KERNELS[op_type](op)(*arrays), derived_kernel(schema, XP)(op)(*arrays)
    assert len(got) == len(want) == 3
    for g, w in zip(got, want):
        _close(np.asarray(g), np.asarray(w), dtype)
