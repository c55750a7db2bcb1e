"""The torch engine's fast ATen paths against the numpy reference where they could part from it: the fused batch
norm kernels (NaN and infinities, one value per channel, rank 2, the running statistics), ATen's relu gradient
(non-finite values), and the one step that computes both gradients of a convolution (only when nothing between
the two ops changes what they share)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.backends.test_torch_backend import conv_and_its_gradients, need_torch, run_on
from tests.backends.xla_harness import assert_same
from tests.framework.op_harness import Case, one_op_program

rng = np.random.default_rng(11)


def _same_as_numpy(case: Case) -> None:
    main, op, feed = one_op_program(case)
    fetch = [n for names in op.outputs.values() for n in names]
    want = run_on("numpy", main, feed, fetch)
    got = run_on("torch", main, feed, fetch)
    assert not isinstance(want, Exception), want
    assert_same(want, got, fetch, f"{case.op} {case.label}")


def _spoiled(x: np.ndarray, trouble: str | None) -> np.ndarray:
    x = x.copy()
    if trouble is not None:
        x.reshape(-1)[1] = {"nan": np.nan, "inf": np.inf}[trouble]
    return x


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 2, 2), (1, 3)], ids=["rank2", "rank4", "one-per-channel"])
@pytest.mark.parametrize("trouble", [None, "nan", "inf"])
@pytest.mark.parametrize("is_test", [False, True], ids=["train", "test"])
def test_fused_batch_norm_and_its_gradient_equal_numpys(dtype, shape, trouble, is_test):
    need_torch()
    x = _spoiled(rng.standard_normal(shape).astype(dtype) * 3 + 1, trouble)
    stats = {"Scale": rng.standard_normal(3).astype(dtype), "Bias": rng.standard_normal(3).astype(dtype),
             "Mean": rng.standard_normal(3).astype(dtype), "Variance": rng.uniform(0.5, 2, 3).astype(dtype)}
    label = f"{dtype} {shape} {trouble} test={is_test}"
    for estimator in ("population", "unbiased"):
        if estimator == "unbiased" and shape == (1, 3) and not is_test:
            continue  # one value per channel has no unbiased variance: a run-time error on every engine
        _same_as_numpy(Case("batch_norm", {"X": x, **stats}, None,
                            {"momentum": 0.8, "epsilon": 1e-5, "is_test": is_test, "running_variance": estimator},
                            label=f"{label} {estimator}"))
    grad_stats = {"Mean": stats["Mean"], "Variance": stats["Variance"]} if is_test else {}
    dy = _spoiled(rng.standard_normal(shape).astype(dtype), "inf" if trouble == "nan" else None)
    _same_as_numpy(Case("batch_norm_grad", {"X": x, "Scale": stats["Scale"], **grad_stats, "Y@GRAD": dy}, None,
                        {"epsilon": 1e-5, "is_test": is_test}, label=label))


@pytest.mark.parametrize("out_trouble,grad_trouble", [(None, None), ("nan", None), (None, "inf"), (None, "nan")])
def test_relu_gradient_equals_numpys_with_nan_and_inf(out_trouble, grad_trouble):
    need_torch()
    out = np.maximum(rng.standard_normal((6, 5)), 0).astype("float32")
    out[0, :2] = 0.0  # inactive units where the gradient is spoiled below
    dout = rng.standard_normal((6, 5)).astype("float32")
    out.reshape(-1)[1] = np.nan if out_trouble else out.reshape(-1)[1]
    dout.reshape(-1)[1] = {"nan": np.nan, "inf": -np.inf, None: dout.reshape(-1)[1]}[grad_trouble]
    _same_as_numpy(Case("relu_grad", {"Out": out, "Out@GRAD": dout}, None, label=f"{out_trouble} {grad_trouble}"))


def _conv_with_both_gradients():
    main, out, grads = conv_and_its_gradients(6, "float64")
    block = main.global_block()
    firsts = [i for i, op in enumerate(block.ops) if op.type == "conv2d_input_grad"]
    seconds = [i for i, op in enumerate(block.ops) if op.type == "conv2d_filter_grad"]
    values = np.random.default_rng(3)
    feed = {"x": values.standard_normal((2, 3, 6, 6)), "g": values.standard_normal((2, 4, 6, 6))}
    return main, [out, *grads], feed, firsts[0], seconds[0]


FILTER = {"k.w": np.random.default_rng(4).standard_normal((4, 3, 3, 3))}


def test_a_convolutions_two_gradients_share_one_step():
    need_torch()
    from gradgen.framework.backend.torch.joint import pairs
    main, fetch, feed, first, second = _conv_with_both_gradients()
    block = main.global_block()
    assert pairs(block, range(len(block.ops))) == {first: second}
    w = FILTER
    assert_same(run_on("numpy", main, feed, fetch, w), run_on("torch", main, feed, fetch, w),
                ["out", "x@GRAD", "w@GRAD"], "paired")


def test_gradients_whose_shared_input_changes_between_them_run_apart():
    """An op between the two that rewrites their output gradient in place: the filter gradient must see the new
    value, so the pair is not joined (joined, it would silently use the old one)."""
    need_torch()
    from gradgen.framework.backend.torch.joint import pairs
    main, fetch, feed, first, second = _conv_with_both_gradients()
    block = main.global_block()
    gout = block.ops[first].input("Output@GRAD")[0]
    block.insert_op(second, "scale", {"X": [gout]}, {"Out": [gout]}, {"scale": 3.0})
    assert pairs(block, range(len(block.ops))) == {}
    w = FILTER
    want = run_on("numpy", main, feed, fetch, w)
    assert_same(want, run_on("torch", main, feed, fetch, w), ["out", "x@GRAD", "w@GRAD"], "apart")
    plain, plain_fetch, _, _, _ = _conv_with_both_gradients()
    unscaled = run_on("numpy", plain, feed, plain_fetch, w)
    np.testing.assert_allclose(want[2], 3.0 * unscaled[2], rtol=1e-12)  # the rewrite is seen: the test can fail


@pytest.mark.parametrize("size,stride,padding,dilation,ceil", [
    (2, 2, 0, 1, False), (3, 1, 1, 1, False), (3, 2, 1, 2, False), (2, 2, [0, 1, 1, 0], 1, False),
    (3, 2, 0, 1, True), (2, 1, 0, 1, False)])
def test_max_pooling_gradient_on_aten_equals_numpys_with_ties(size, stride, padding, dilation, ceil):
    """ATen's max pooling gradient where it applies (even padding, no ceil mode) and the masks where not: the
    same first maximum of each window on ties."""
    need_torch()
    from gradgen.framework import gradients
    from gradgen.program import Program, layers, program_guard
    x_value = np.round(np.random.default_rng(8).standard_normal((2, 3, 7, 7)))  # few values: ties everywhere
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3, 7, 7], "float32")
        out = layers.pool2d(x, size, "max", stride=stride, padding=padding, ceil_mode=ceil, dilation=dilation)
        g = layers.data("g", list(out.shape), "float32")
        (x_grad,) = gradients([layers.reduce_sum(out * g)], [x])
    feed = {"x": x_value.astype("float32"),
            "g": np.random.default_rng(9).standard_normal(out.shape).astype("float32")}
    want = run_on("numpy", main, feed, [out, x_grad])
    assert_same(want, run_on("torch", main, feed, [out, x_grad]), ["out", "x@GRAD"], "pool")


def test_batch_statistics_kept_for_the_gradient_die_with_their_tensor_and_match_a_recomputation():
    need_torch()
    import gc

    import torch

    from gradgen.framework.backend.torch.kernels import kept
    from gradgen.program import Program
    main = Program()
    block = main.global_block()
    for name, shape in (("x", [6, 3, 2, 2]), ("s", [3]), ("b", [3]), ("m", [3]), ("v", [3]), ("dy", [6, 3, 2, 2])):
        block.create_var(name, shape, "float64")
    for name in ("y", "mo", "vo", "dx", "ds", "db"):
        block.create_var(name, [6, 3, 2, 2] if name in ("y", "dx") else [3], "float64")
    forward = block.append_op("batch_norm", {"X": ["x"], "Scale": ["s"], "Bias": ["b"], "Mean": ["m"],
                                             "Variance": ["v"]}, {"Y": ["y"], "MeanOut": ["mo"], "VarianceOut": ["vo"]})
    backward = block.append_op("batch_norm_grad", {"X": ["x"], "Scale": ["s"], "Y@GRAD": ["dy"]},
                               {"X@GRAD": ["dx"], "Scale@GRAD": ["ds"], "Bias@GRAD": ["db"]})
    from gradgen.framework.backend.torch.kernels import KERNELS
    gen = torch.Generator().manual_seed(0)
    x, dy = torch.randn(6, 3, 2, 2, generator=gen, dtype=torch.float64), torch.randn(6, 3, 2, 2, dtype=torch.float64)
    stats = [torch.randn(3, dtype=torch.float64) for _ in range(3)] + [torch.ones(3, dtype=torch.float64)]
    recomputed = KERNELS["batch_norm_grad"](backward)(x, stats[0], dy)
    KERNELS["batch_norm"](forward)(x, *stats)
    assert kept.kept(x, ("batch_norm", 1e-5)) is not None and kept.kept(x.clone(), ("batch_norm", 1e-5)) is None
    assert kept.kept(x, ("batch_norm", 1e-3)) is None  # another epsilon: not these statistics
    from_kept = KERNELS["batch_norm_grad"](backward)(x, stats[0], dy)
    for a, b in zip(recomputed, from_kept):
        assert torch.equal(a, b)  # bit for bit
    held = len(kept._KEPT)
    del x
    gc.collect()
    assert len(kept._KEPT) == held - 1


def test_max_pooling_keeps_its_indices_only_for_a_gradient_the_block_computes():
    need_torch()
    import torch

    from gradgen.framework import gradients
    from gradgen.framework.backend.torch.kernels import KERNELS, kept
    from gradgen.program import Program, layers, program_guard
    for with_gradient in (True, False):
        main = Program()
        with program_guard(main, Program()):
            x = layers.data("x", [2, 3, 6, 6], "float32")
            out = layers.pool2d(x, 2, "max")
            if with_gradient:
                gradients([layers.reduce_sum(out)], [x])
        pool = next(op for op in main.global_block().ops if op.type == "pool2d")
        value = torch.randn(2, 3, 6, 6)
        got = KERNELS["pool2d"](pool)(value)
        key = ("max_pool", ((2, 2), (2, 2), (0, 0), (1, 1)))
        assert (kept.kept(value, key) is not None) == with_gradient
        if with_gradient:
            grad = next(op for op in main.global_block().ops if op.type == "pool2d_grad")
            gout = torch.randn(2, 3, 3, 3)
            from_kept = KERNELS["pool2d_grad"](grad)(value, gout)
            assert torch.equal(from_kept, KERNELS["pool2d_grad"](grad)(value.clone(), gout))  # recomputed: the same
            assert torch.equal(got, torch.nn.functional.max_pool2d(value, 2))


@pytest.mark.parametrize("values,finite", [
    ([[1.0, 2.0], [3.0]], True),
    ([[1.0, np.inf], [3.0]], False),
    ([[np.nan], [3.0]], False),
    ([[np.inf], [-np.inf]], False),  # one tensor's +inf and another's -inf: their sums add to NaN, still caught
    ([[], [2.0]], True),
    ([[3e38, 3e38], [1.0]], False),  # a float32 sum that overflows: the careful path, which is right too
])
def test_the_finite_check_catches_every_nonfinite_value(values, finite):
    need_torch()
    import torch

    from gradgen.framework.backend.torch.kernels.finite import all_finite

    tensors = [torch.tensor(v, dtype=torch.float32) for v in values]
    assert all_finite(*tensors, torch.tensor([7], dtype=torch.int64)) is finite
