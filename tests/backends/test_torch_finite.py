"""What the torch engine knows finite without a sum, and what a broadcast costs it: the outputs of ops that keep
finite values finite (``OpSchema.finite_from_finite``), the broadcast dims of a tensor under test summed once
(``finite._distinct``), and reduce_mean's gradient left a broadcast view (no copy) that the scope still receives as
an array of its own."""
from __future__ import annotations

import numpy as np
import pytest

from tests.backends.test_torch_backend import need_torch
from gradgen.framework.backend.numpy.xp import XP as NP
from gradgen.program import OP_SCHEMAS

KEEPING = sorted(t for t, s in OP_SCHEMAS.items() if s.finite_from_finite)

EXTREMES = {
    dtype: np.array([0.0, -0.0, 1.0, -1.0, np.finfo(dtype).max, -np.finfo(dtype).max, np.finfo(dtype).tiny,
                     np.finfo(dtype).smallest_subnormal, -np.finfo(dtype).smallest_subnormal, 1e4, -1e4, 3.0],
                    dtype=dtype)
    for dtype in ("float16", "float32", "float64")
}
"""The finite values at the ends of each float dtype's range and around 0."""


def test_some_ops_keep_finite_values_finite():
    assert {"relu", "abs"} <= set(KEEPING)


@pytest.mark.parametrize("op_type", KEEPING)
@pytest.mark.parametrize("dtype", sorted(EXTREMES))
def test_an_op_said_to_keep_finite_values_finite_does_on_the_reference(op_type, dtype):
    """The flag's claim, on the reference's compute over every finite extreme: an op whose output could overflow
    (exp, a scale) must not carry it."""
    schema = OP_SCHEMAS[op_type]
    assert len(schema.inputs) == 1 and len(schema.outputs) == 1, op_type
    x = EXTREMES[dtype]
    with np.errstate(over="raise", invalid="raise"):
        out = np.asarray(schema.compute(NP, x, **{n: a.default for n, a in schema.attrs.items()}))
    assert np.isfinite(out).all(), (op_type, dtype, out)


def _kernel(op_type: str, dtype: str):
    from gradgen.framework.backend.torch.kernels import KERNELS
    from gradgen.program import Program

    block = Program().global_block()
    block.create_var("x", [2, 6], dtype)
    block.create_var("y", [2, 6], dtype)
    return KERNELS[op_type](block.append_op(op_type, {"X": ["x"]}, {"Out": ["y"]}))


@pytest.mark.parametrize("op_type", KEEPING)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("input_is", ["proven", "unproven", "nan", "inf"])
def test_an_output_is_known_finite_only_where_its_input_is(op_type, dtype, input_is):
    need_torch()
    import torch

    from gradgen.framework.backend.torch.kernels import finite

    values = np.random.default_rng(0).standard_normal((2, 6)).astype(dtype)
    if input_is in ("nan", "inf"):
        values[1, 3] = float(input_is)
    x = torch.from_numpy(values)
    with finite.remembered_finite():
        proven = finite.all_finite(x) if input_is != "unproven" else None
        y = _kernel(op_type, dtype)(x)
        known = finite.remembered(y)
    assert proven is (None if input_is == "unproven" else input_is == "proven")
    proves_itself = OP_SCHEMAS[op_type].aten_finite_out  # (its ATen call sums the input first: sigmoid's)
    assert known is (input_is == "proven" or (input_is == "unproven" and proves_itself))
    assert torch.isfinite(y).all() or input_is in ("nan", "inf")


@pytest.mark.parametrize("trouble", [None, "nan", "inf", "-inf"])
def test_a_broadcast_is_summed_over_its_distinct_values(trouble):
    need_torch()
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from gradgen.framework.backend.torch.kernels import finite

    base = torch.randn(4, 1, 3, 1)
    if trouble:
        base[2, 0, 1, 0] = float(trouble)
    wide = base.expand(4, 5, 3, 7)
    summed = []

    class Sums(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.overloadpacket.__name__ == "sum":
                summed.append(args[0].numel())
            return func(*args, **(kwargs or {}))

    with Sums():
        found = finite.all_finite(wide)
    assert found is (trouble is None)
    assert summed == [12]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_reduce_means_gradient_reaches_the_scope_as_an_array_of_its_own(dtype):
    """The gradient is a broadcast view on torch (no copy); a persistable made of it is the scope's own dense
    array: writing one element changes that element alone."""
    need_torch()
    from gradgen.framework import Executor, Scope
    from gradgen.program import Program

    main = Program()
    block = main.global_block()
    block.create_var("x", [3, 4, 5], dtype)
    block.create_var("dout", [3], dtype)
    block.create_var("dx", [3, 4, 5], dtype, persistable=True)
    block.append_op("reduce_mean_grad", {"X": ["x"], "Out@GRAD": ["dout"]}, {"X@GRAD": ["dx"]},
                    {"dim": [1, 2], "keep_dim": False, "reduce_all": False})
    feed = {"x": np.zeros((3, 4, 5), dtype), "dout": np.array([20.0, -40.0, 60.0], dtype)}
    scopes = {backend: Scope() for backend in ("numpy", "torch")}
    for backend, scope in scopes.items():
        Executor(backend=backend).run(main, feed=feed, fetch_list=[], scope=scope)
    kept, reference = scopes["torch"].get("dx"), scopes["numpy"].get("dx")
    np.testing.assert_array_equal(kept, reference)
    assert kept.dtype == np.dtype(dtype) and 0 not in kept.strides and kept.flags.writeable
    kept[0, 0, 0] = 7.0
    assert kept[0, 0, 1] == reference[0, 0, 1] and kept[1, 0, 0] == reference[1, 0, 0]
