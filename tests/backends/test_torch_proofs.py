"""Inputs a finite output proves finite (``OpSchema.finite_out_proves``): the claim on the reference's compute over
NaN, infinities and empty dims, the torch engine's use of it (a reduction's small output summed, its input then
known finite to the products that read it next), and a program where a wrong proof would show: a gradient's bias
sum beside its two products, on the torch engine and the reference."""
from __future__ import annotations

import numpy as np
import pytest

from tests.backends.test_torch_backend import need_torch, run_on
from gradgen.framework.backend.numpy.xp import XP as NP
from gradgen.program import OP_SCHEMAS, Program

PROVING = sorted(t for t, s in OP_SCHEMAS.items() if s.finite_out_proves)

SPECIALS = {"nan": [np.nan], "inf": [np.inf], "-inf": [-np.inf], "inf and -inf": [np.inf, -np.inf], "none": []}

SHAPES = [(5, 3), (1, 4), (6, 1), (0, 3), (3, 0), (2, 3, 4)]


def _args(op_type: str, x: np.ndarray) -> tuple[tuple, dict]:
    """The op's inputs and attrs for ``x``: the leading dim reduced (all of them for ``mean``)."""
    if op_type == "reduce_as":
        return (x, np.zeros((1,) + x.shape[1:], x.dtype)), {}
    if op_type == "mean":
        return (x,), {}
    return (x,), {"dim": [0], "keep_dim": False, "reduce_all": False}


def test_the_adding_reductions_prove_their_input():
    assert {"reduce_sum", "reduce_mean", "reduce_as", "mean"} <= set(PROVING)
    assert not {"reduce_max", "reduce_min", "logsumexp"} & set(PROVING)  # (they drop an infinity: max(-inf, 1))
    assert OP_SCHEMAS["reduce_as"].finite_out_proves == ("X",)  # (Target gives only its shape)


@pytest.mark.parametrize("op_type", PROVING)
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("special", sorted(SPECIALS))
def test_a_finite_output_has_finite_inputs_on_the_reference(op_type, dtype, shape, special):
    """The flag's claim, on the reference's compute: wherever a special value sits (one position, or +inf and -inf
    in one column, whose sum is NaN), the output is not finite, or the input had none."""
    schema = OP_SCHEMAS[op_type]
    rng = np.random.default_rng(len(shape) * 7 + len(special))
    for trial in range(6):
        x = rng.standard_normal(shape).astype(dtype)
        flat = x.reshape(-1)
        for value in SPECIALS[special]:
            if flat.size:
                flat[rng.integers(flat.size) if trial else 0] = value
        args, attrs = _args(op_type, x)
        with np.errstate(all="ignore"):
            out = np.asarray(schema.compute(NP, *args, **attrs))
        if np.isfinite(out).all():
            assert np.isfinite(x).all(), (op_type, dtype, shape, special, x, out)


def _kernel(op_type: str, shape: tuple[int, ...], dtype: str):
    from gradgen.framework.backend.torch.kernels import KERNELS

    block = Program().global_block()
    block.create_var("x", list(shape), dtype)
    inputs = {"X": ["x"]}
    if op_type == "reduce_as":
        block.create_var("t", [1, shape[1]], dtype)
        inputs["Target"] = ["t"]
    block.create_var("y", {"mean": [], "reduce_as": [1, shape[1]]}.get(op_type, [shape[1]]), dtype)
    attrs = _args(op_type, np.zeros(shape, dtype))[1]
    return KERNELS[op_type](block.append_op(op_type, inputs, {"Out": ["y"]}, attrs))


@pytest.mark.parametrize("op_type", PROVING)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("input_is", ["finite", "nan", "inf", "small"])
def test_the_torch_engine_knows_the_input_finite_only_where_the_output_proves_it(op_type, dtype, input_is):
    """A [64, 32] input summed to 32 values (the ratio ``derived.PROOF_RATIO`` asks): known finite after the kernel
    only where it is; an input of [4, 32], fewer than the ratio's multiple of the output, is not summed for it
    (``mean``'s one value is: 128 elements). The output is the reference's either way."""
    need_torch()
    import torch

    from gradgen.framework.backend.torch.kernels import finite

    shape = (4, 32) if input_is == "small" else (64, 32)
    values = np.random.default_rng(1).standard_normal(shape).astype(dtype)
    if input_is in ("nan", "inf"):
        values[3, 5] = float(input_is)
    args, attrs = _args(op_type, values)
    tensors = [torch.from_numpy(a) for a in args]
    with finite.remembered_finite():
        out = _kernel(op_type, shape, dtype)(*tensors)
        known = finite.remembered(tensors[0])
    assert known is (input_is == "finite" or (input_is == "small" and op_type == "mean"))
    want = np.asarray(OP_SCHEMAS[op_type].compute(NP, *args, **attrs))
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-5)


def _bias_and_products(dtype: str) -> Program:
    """A gradient g's bias sum (reduce_as), then its two products, as an fc layer's backward reads it."""
    main = Program()
    block = main.global_block()
    for name, shape in {"g": [64, 32], "b": [32], "x": [64, 16], "w": [16, 32], "db": [32], "dx": [64, 16],
                        "dw": [16, 32]}.items():
        block.create_var(name, shape, dtype)
    block.append_op("reduce_as", {"X": ["g"], "Target": ["b"]}, {"Out": ["db"]})
    block.append_op("matmul", {"X": ["g"], "Y": ["w"]}, {"Out": ["dx"]}, {"transpose_x": False, "transpose_y": True})
    block.append_op("matmul", {"X": ["x"], "Y": ["g"]}, {"Out": ["dw"]}, {"transpose_x": True, "transpose_y": False})
    return main


@pytest.fixture
def poisoned_products(monkeypatch):
    """The engine as on a machine where torch's product measured faster, that product giving NaN everywhere for
    operands not all finite: what the engine must never hand on (MKL's gives NaN for some of IEEE's infinities)."""
    need_torch()
    import torch

    from gradgen.framework.backend.torch.kernels import linalg

    own = torch.matmul

    def product(a, b):
        out = own(a, b)
        return out if bool(torch.isfinite(a).all() and torch.isfinite(b).all()) else torch.full_like(out, np.nan)

    monkeypatch.setattr(linalg, "torch_is_faster", lambda threads: True)
    monkeypatch.setattr(linalg.torch, "matmul", product)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("special", sorted(SPECIALS))
def test_a_bias_sum_beside_two_products_gives_the_references_values(poisoned_products, dtype, special):
    """g with NaN, an infinity, or +inf and -inf in one column (the bias sum NaN): the bias sum proves nothing, and
    the products take the reference's path, each NaN and infinity where the reference has it (with g taken for
    finite, torch's poisoned product would come out); the finite values match to rounding (the sums and products
    add in other orders)."""
    rng = np.random.default_rng(3)
    feed = {"g": rng.standard_normal((64, 32)).astype(dtype), "b": np.zeros(32, dtype),
            "x": rng.standard_normal((64, 16)).astype(dtype), "w": rng.standard_normal((16, 32)).astype(dtype)}
    for row, value in enumerate(SPECIALS[special]):
        feed["g"][10 + row, 7] = value
    main = _bias_and_products(dtype)
    fetch = ["db", "dx", "dw"]
    got, want = run_on("torch", main, feed, fetch), run_on("numpy", main, feed, fetch)
    for name, a, b in zip(fetch, got, want):
        assert a.dtype == b.dtype == np.dtype(dtype), name
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b), err_msg=name)
        np.testing.assert_array_equal(np.where(np.isinf(a), a, 0), np.where(np.isinf(b), b, 0), err_msg=name)
        finite = np.isfinite(b)
        np.testing.assert_allclose(a[finite], b[finite], rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-5,
                                   err_msg=name)
