"""Every into kernel computes exactly what its plain kernel does, writes only into a buffer that fits, and never
touches its inputs."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework.runtime.kernels import INTO, KERNELS
from tests.framework.op_cases import ALL_CASES
from tests.framework.op_harness import Case, one_op_program

_rng = np.random.default_rng(0)


def _randn(dtype):
    return _rng.standard_normal((5, 3)).astype(dtype)


SGD_CASES = [Case("sgd", {"Param": _randn(d), "Grad": _randn(d), "LearningRate": np.asarray(0.1, d)}, None)
             for d in ("float32", "float64")]
MOMENTUM_CASES = [Case("momentum", {"Param": _randn(d), "Grad": _randn(d), "Velocity": _randn(d),
                                     "LearningRate": np.asarray(0.1, d)}, None, attrs={"mu": 0.9, "use_nesterov": n},
                      label=f"nesterov={n}") for d in ("float32", "float64") for n in (False, True)]
ADAM_CASES = [Case("adam", {"Param": _randn(d), "Grad": _randn(d), "LearningRate": np.asarray(0.1, d),
                             "Moment1": _randn(d),
                             "Moment2": _rng.random((5, 3)).astype(d), "Beta1Pow": np.asarray([0.9], d),
                             "Beta2Pow": np.asarray([0.999], d)}, None,
                   attrs={"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}) for d in ("float32", "float64")]
INTO_CASES = [c for c in ALL_CASES if c.op in INTO] + SGD_CASES
MULTI_CASES = MOMENTUM_CASES + ADAM_CASES


def _one_op(case):
    """The case's op in a one-op block, and its input arrays flat in the kernel's argument order."""
    _, op, feed = one_op_program(case)
    return op, [feed[n] for n in op.input_arg_names]


def test_there_are_into_cases_for_every_into_kernel():
    assert {c.op for c in INTO_CASES + MULTI_CASES} == set(INTO)


def _declined(case) -> bool:
    return INTO[case.op](_one_op(case)[0]) is None


DECLINED_CASES = [c for c in INTO_CASES if _declined(c)]
ACCEPTED_CASES = [c for c in INTO_CASES if not _declined(c)]


@pytest.mark.parametrize("case", DECLINED_CASES, ids=lambda c: c.id)
def test_a_declining_factory_leaves_the_op_to_its_plain_kernel(case):
    """Attrs or ranks an into kernel does not handle: the factory says so at plan time, never half-way."""
    op, args = _one_op(case)
    assert op.type not in ("sgd", "relu", "relu_grad")  # the kernels the buffers exist for never decline
    want = np.asarray(KERNELS[op.type](op)(*args))
    declared = op.block.var(op.output_arg_names[0])
    assert want.dtype.name == declared.dtype and len(want.shape) == len(declared.shape)


@pytest.mark.parametrize("case", ACCEPTED_CASES, ids=lambda c: c.id)
def test_into_kernel_equals_the_plain_kernel_with_and_without_a_buffer(case):
    op, args = _one_op(case)
    into = INTO[op.type](op)
    before = [a.copy() for a in args]
    want = np.asarray(KERNELS[op.type](op)(*args))
    np.testing.assert_array_equal(into(*args, None), want)
    buf = np.full(want.shape, 7, want.dtype)
    got = into(*args, buf)
    np.testing.assert_array_equal(got, want)
    if got is not buf:  # declined at run time (broadcasting, mixed dtypes): then the buffer is left alone
        assert (buf == 7).all()
    # The cases the buffers are for must use them: no broadcasting, or a 2-D product.
    arrays = args[:2] if op.type == "sgd" else args  # not sgd's scalar learning rate
    same_shape = all(a.shape == want.shape for a in arrays)
    assert got is buf or not (same_shape or op.type == "matmul" and all(a.ndim == 2 for a in args))
    wrong = np.full(want.shape + (2,), 7, want.dtype)
    np.testing.assert_array_equal(into(*args, wrong), want)
    assert (wrong == 7).all()  # a buffer that does not fit is left alone
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("case", MULTI_CASES, ids=lambda c: c.id)
def test_multi_output_update_writes_each_output_into_its_buffer(case):
    op, args = _one_op(case)
    into = INTO[op.type](op)
    before = [a.copy() for a in args]
    want = KERNELS[op.type](op)(*args)
    for got in (into(*args, (None,) * len(want)), into(*args, (np.empty_like(want[0]),) + (None,) * (len(want) - 1))):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    bufs = tuple(np.full_like(w, 7) for w in want)
    got = into(*args, bufs)
    assert all(g is b for g, b in zip(got, bufs))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b)
