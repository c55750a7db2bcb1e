"""The torch engine's normalizations against the numpy reference: batch norm on ATen's fused kernels (NaN and
infinities, one value per channel, rank 2, the running statistics, the batch statistics kept for the gradient, a
gradient where ATen's overflows) and layer norm on ``native_layer_norm`` (the op's one ATen call,
``program/ops/network.layer_norm_aten``) and ``native_layer_norm_backward`` (rows far from 0, rows of one value,
optional slots, the float range's end, the statistics kept for the gradient); and where ATen's folded batch norm
parts from the compute (a Scale or an X near the float range's end, channels far from 0 under the running
statistics)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.backends.test_torch_backend import need_torch, run_on
from tests.backends.test_torch_fast_paths import _same_as_numpy, _spoiled, _spoiled_at
from tests.backends.xla_harness import assert_same
from tests.framework.op_harness import Case, one_op_program

rng = np.random.default_rng(13)


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


NORMED = [((6, 5), 1), ((6, 5), -1), ((3, 4, 5), 1), ((3, 4, 5), -1), ((3, 4, 5), 2), ((2, 3, 4, 5), -2),
          ((2, 3, 4, 5), 1), ((2, 3, 4, 5), 0), ((0, 4, 5), -1), ((3, 0, 5), 1)]
"""(X's shape, begin_norm_axis): ranks 2-4, negative axes, one row over all of X, an empty batch, empty rows."""


def _layer_norm_cases(dtype: str, shape: tuple, begin: int, trouble: str | None, affine: bool):
    split = begin % len(shape)
    lead, width = int(np.prod(shape[:split])), int(np.prod(shape[split:]))
    x = rng.standard_normal(shape) * 3 + 1
    rows = x.reshape(lead, width)
    if lead >= 3 and width > 1:
        rows[0] = 2.5  # a constant row: variance 0 exactly (ATen's rstd gives +-1e-12)
        rows[1] = 0.01 + 1e-4 * rows[1]  # variance far below epsilon: recomputed, not from rstd
        # a mean ~230 standard deviations from 0 (past _SPREAD: the compute's path) in float64; float32's own
        # rounding there parts numpy from the derived kernel by more than the tolerance, so ~10 there (ATen's)
        rows[2] = (7.0 if dtype == "float64" else 0.3) + 0.01 * rows[2]
    x = _spoiled_at(x.astype(dtype), trouble, at=x.size - 2)
    norm = shape[begin % len(shape):]
    given = {"Scale": rng.standard_normal(norm).astype(dtype), "Bias": rng.standard_normal(norm).astype(dtype)}
    return x, given if affine else {}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,begin", NORMED, ids=[f"{s}@{b}" for s, b in NORMED])
@pytest.mark.parametrize("trouble", [None, "nan", "inf"])
def test_layer_norm_and_its_gradient_on_aten_equal_numpys(dtype, shape, begin, trouble):
    need_torch()
    for affine in (True, False):
        x, given = _layer_norm_cases(dtype, shape, begin, trouble, affine)
        label = f"{dtype} {shape} begin={begin} {trouble} affine={affine}"
        attrs = {"begin_norm_axis": begin, "epsilon": 1e-5}
        _same_as_numpy(Case("layer_norm", {"X": x, **given}, None, attrs, label=label))
        dy = rng.standard_normal(shape).astype(dtype)
        scale = {"Scale": given["Scale"]} if affine else {}
        grads = {"Scale@GRAD": 1, "Bias@GRAD": 1}  # Scale@GRAD without a Scale too: the gradient of ones
        _same_as_numpy(Case("layer_norm_grad", {"X": x, **scale, "Y@GRAD": dy}, None, attrs, grads, label=label))
        if trouble is None:  # the output gradient spoiled instead
            for bad in ("nan", "-inf"):
                _same_as_numpy(Case("layer_norm_grad", {"X": x, **scale, "Y@GRAD": _spoiled_at(dy, bad)}, None, attrs,
                                    grads, label=f"{label} dY {bad}"))
            _same_as_numpy(Case("layer_norm_grad", {"X": x, **scale, "Y@GRAD": dy}, None, attrs, label=label))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_layer_norm_with_some_of_its_optional_slots_equals_numpys(dtype):
    """Scale without Bias and Bias without Scale; the gradient with one of Scale@GRAD and Bias@GRAD (ATen makes
    each beside a weight or a bias only)."""
    need_torch()
    x, dy = (rng.standard_normal((3, 4, 5)).astype(dtype) for _ in range(2))
    given = {slot: rng.standard_normal(5).astype(dtype) for slot in ("Scale", "Bias")}
    attrs = {"begin_norm_axis": -1, "epsilon": 1e-5}
    for slot in ("Scale", "Bias"):
        _same_as_numpy(Case("layer_norm", {"X": x, slot: given[slot]}, None, attrs, label=f"{dtype} {slot} only"))
    for scale in ({"Scale": given["Scale"]}, {}):
        for grad in ("Scale@GRAD", "Bias@GRAD"):
            _same_as_numpy(Case("layer_norm_grad", {"X": x, **scale, "Y@GRAD": dy}, None, attrs, {grad: 1},
                                label=f"{dtype} {sorted(scale)} {grad} only"))


def test_layer_norm_near_the_float_range_takes_the_compute():
    need_torch()
    attrs = {"begin_norm_axis": -1, "epsilon": 1e-5}
    big = rng.standard_normal((4, 8)).astype("float32") * 1e18  # the compute's squares overflow: Variance inf
    _same_as_numpy(Case("layer_norm", {"X": big}, None, attrs, label="squares overflow"))
    huge_dy = (rng.standard_normal((4, 8)) * 1e36).astype("float32")
    _same_as_numpy(Case("layer_norm_grad", {"X": big * 1e-18, "Y@GRAD": huge_dy}, None, attrs,
                        {"Scale@GRAD": 1, "Bias@GRAD": 1}, label="dY near the float range"))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,begin", [((6, 1), -1), ((3, 4, 1), 2), ((2, 1, 1), 1)], ids=["rank2", "rank3", "1x1"])
def test_layer_norm_over_one_value_gives_a_scale_gradient_of_zero(dtype, shape, begin):
    """A row of one value is its own mean: X - mean is 0, so are Y - Bias, dX and Scale@GRAD, exactly, in the
    compute. ATen's gradient forms rstd X - rstd mean with a fused multiply-add, which leaves the rounding of rstd X
    (rstd = 1 / sqrt(eps), ~316): 0.17 over six float32 values of 1e4 (the random-program differential test, seed
    1251 of three pieces, 1.49)."""
    need_torch()
    x = (rng.choice([-1, 1], shape) * rng.uniform(1e3, 1e5, shape)).astype(dtype)
    dy = rng.standard_normal(shape).astype(dtype)
    attrs = {"begin_norm_axis": begin, "epsilon": 1e-5}
    norm = {"Scale": rng.standard_normal(shape[begin:]).astype(dtype)}
    for scale in (norm, {}):
        _same_as_numpy(Case("layer_norm_grad", {"X": x, **scale, "Y@GRAD": dy}, None, attrs,
                            {"Scale@GRAD": 1, "Bias@GRAD": 1}, label=f"{dtype} {shape} {sorted(scale)}"))


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


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape, begin", [((16, 8, 32), 2), ((4, 7), 1), ((2, 3, 4, 5), 1), ((5, 3, 33), 2)])
def test_layer_norm_statistics_kept_for_the_gradient_match_a_recomputation_and_die_with_their_tensor(dtype, shape,
                                                                                                     begin):
    """The forward keeps ``native_layer_norm``'s mean and rstd for X; the gradient made from them is the one made
    from its own recomputation (without the weight and bias) bit for bit, at one thread and two; they are kept for
    that X and epsilon only, and go with X."""
    need_torch()
    import gc

    import torch

    from gradgen.framework.backend.torch.kernels import KERNELS, kept
    from gradgen.program import Program
    main = Program()
    block = main.global_block()
    norm = list(shape[begin:])
    for name, var_shape in (("x", shape), ("s", norm), ("b", norm), ("dy", shape), ("y", shape), ("dx", shape),
                            ("ds", norm), ("db", norm), ("mean", shape[:begin]), ("var", shape[:begin])):
        block.create_var(name, list(var_shape), dtype)
    attrs = {"begin_norm_axis": begin, "epsilon": 1e-5}
    forward = block.append_op("layer_norm", {"X": ["x"], "Scale": ["s"], "Bias": ["b"]},
                              {"Y": ["y"], "Mean": ["mean"], "Variance": ["var"]}, attrs)
    backward = block.append_op("layer_norm_grad", {"X": ["x"], "Scale": ["s"], "Y@GRAD": ["dy"]},
                               {"X@GRAD": ["dx"], "Scale@GRAD": ["ds"], "Bias@GRAD": ["db"]}, attrs)
    torch_dtype = getattr(torch, dtype)
    before = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            x = torch.from_numpy((rng.standard_normal(shape) * 3 + 1).astype(dtype))
            s, b = (torch.from_numpy(rng.standard_normal(norm).astype(dtype)) for _ in range(2))
            dy = torch.from_numpy(rng.standard_normal(shape).astype(dtype))
            recomputed = KERNELS["layer_norm_grad"](backward)(x, s, dy)
            KERNELS["layer_norm"](forward)(x, s, b)
            key = kept.row_statistics_key(norm, 1e-5)
            assert kept.kept(x, key) is not None and kept.kept(x.clone(), key) is None
            assert kept.kept(x, key[:2] + (1e-3,)) is None  # another epsilon: not these statistics
            assert all(t.dtype == torch_dtype for t in kept.kept(x, key))
            from_kept = KERNELS["layer_norm_grad"](backward)(x, s, dy)
            for a, c in zip(recomputed, from_kept):
                assert torch.equal(a, c), threads  # bit for bit
            held = len(kept._KEPT)
            del x
            gc.collect()
            assert len(kept._KEPT) == held - 1
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_layer_norms_forward_runs_as_its_one_aten_call_and_its_gradient_on_atens(dtype, monkeypatch):
    """In a run with layer norm's forward and gradient over one X, the forward is ``layer_norm_aten``'s
    ``native_layer_norm`` and the gradient reads the rows' statistics it kept (no second call); both give the
    reference's numbers, and the forward's Y is known finite (the products reading it do not sum it)."""
    need_torch()
    import torch

    from gradgen.framework import append_backward
    from gradgen.framework.backend.torch.kernels import kept, network
    from gradgen.program import Program, layers, program_guard

    calls = []

    class Counting:
        def __getattr__(self, name):
            found = getattr(torch.ops.aten, name)
            return (lambda *a, **k: calls.append(name) or found(*a, **k)) if name == "native_layer_norm" else found

    monkeypatch.setattr(network, "_aten", Counting())
    monkeypatch.setattr(kept, "_aten", Counting())  # (the operators the derived kernels' ATen calls reach)
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 6, 8], dtype)
        x.stop_gradient = False
        y = layers.layer_norm(x, begin_norm_axis=-1, name="ln")
        loss = layers.reduce_sum(layers.square(y))
        append_backward(loss)
    feed = {"x": (rng.standard_normal((3, 6, 8)) * 2 + 0.5).astype(dtype)}
    params = {"ln.scale": rng.standard_normal(8).astype(dtype), "ln.bias": rng.standard_normal(8).astype(dtype)}
    (grad_op,) = [op for op in main.global_block().ops if op.type == "layer_norm_grad"]
    fetches = [y.name, grad_op.output("X@GRAD")[0], grad_op.output("Scale@GRAD")[0]]
    got = run_on("torch", main, feed, fetches, params)
    assert calls == ["native_layer_norm"], got
    assert_same(run_on("numpy", main, feed, fetches, params), got, fetches, "forward and gradient")


@pytest.mark.parametrize("seed", [1, 10, 11])
def test_batch_norms_gradient_where_aten_overflows_takes_the_compute(seed, monkeypatch):
    """A float64 X holding the largest float: the compute's dX is finite there (1e308), ATen's formula overflowed
    to inf (in 77 of 200 such draws); the kernel's bound on its terms sends it to the compute. Beside
    it, a plain draw whose dX the convolution's gradient would read is known finite (not summed again)."""
    need_torch()
    draw = np.random.default_rng(seed)
    x = draw.standard_normal((4, 3, 4, 8))
    x[1, 2, 0, 3] = np.finfo("float64").max
    inputs = {"X": x, "Scale": draw.standard_normal(3), "Mean": np.zeros(3), "Variance": np.ones(3),
              "Y@GRAD": draw.standard_normal((4, 3, 4, 8))}
    _same_as_numpy(Case("batch_norm_grad", inputs, None, {}, label=f"seed {seed}"))
    import torch

    from gradgen.framework.backend.torch.kernels import KERNELS, finite
    _, op, feed = one_op_program(Case("batch_norm_grad", {**inputs, "X": draw.standard_normal((4, 3, 4, 8))}, None,
                                      {}))
    arrays = [torch.from_numpy(feed[op.input(slot)[0]]) for slot in ("X", "Scale", "Mean", "Variance", "Y@GRAD")]
    with finite.remembered_finite():
        dx = KERNELS["batch_norm_grad"](op)(*arrays)[0]
        summed, own = [], torch.sum
        monkeypatch.setattr(finite.torch, "sum", lambda t: summed.append(t) or own(t))
        assert finite.all_finite(dx) and summed == []


def _batch_norm_cases(x, scale, is_test: bool, label: str) -> list:
    dtype, plain = x.dtype, x[np.isfinite(x) & (np.abs(x) < 1e6)]  # (the running statistics of ordinary values)
    stats = {"Scale": scale, "Bias": np.full(3, 0.5, dtype), "Mean": np.full(3, float(plain.mean()), dtype),
             "Variance": np.full(3, float(plain.var()), dtype)}
    grad_stats = {"Mean": stats["Mean"], "Variance": stats["Variance"]} if is_test else {}
    dy = rng.standard_normal(x.shape).astype(dtype)
    return [Case("batch_norm", {"X": x, **stats}, None, {"momentum": 0.8, "epsilon": 1e-5, "is_test": is_test},
                 label=label),
            Case("batch_norm_grad", {"X": x, "Scale": scale, **grad_stats, "Y@GRAD": dy}, None,
                 {"epsilon": 1e-5, "is_test": is_test}, label=label)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("is_test", [False, True], ids=["train", "test"])
def test_batch_norm_where_atens_folded_formula_parts_from_the_compute_takes_the_compute(dtype, is_test):
    """ATen forms Y = X a + (Bias - mean a), a = Scale rstd, where the compute centres first: a Scale of inf or
    near the largest float made NaN where the compute's Y is +-inf; with the running statistics a channel 1e4
    deviations from 0 lost about that many ulp (float32 8e-5, float64 2e-13); an X at the float range's end
    overflowed in the compute's Scale@GRAD and not in ATen's (test mode). Each takes the reference's numbers."""
    need_torch()
    most = float(np.finfo(dtype).max)
    plain = rng.standard_normal((4, 3, 2, 2)).astype(dtype)
    for value in (most, most / 2, np.inf, -np.inf):
        scale = np.array([1.5, value, -0.5], dtype)
        for case in _batch_norm_cases(plain, scale, is_test, f"{dtype} Scale {value}"):
            _same_as_numpy(case)
    if is_test:  # (in training the compute's own sums over torch part further: the kernel keeps ATen's)
        far = (1e4 + rng.standard_normal((8, 3, 4, 4))).astype(dtype)
        for case in _batch_norm_cases(far, rng.standard_normal(3).astype(dtype), is_test, f"{dtype} 1e4 out"):
            _same_as_numpy(case)
    for value in (-most, most / 2):
        spoiled = plain.copy()
        spoiled[0, 0, 0, 0] = value
        for case in _batch_norm_cases(spoiled, rng.standard_normal(3).astype(dtype), is_test, f"{dtype} X {value}"):
            _same_as_numpy(case)


@pytest.mark.parametrize("is_test", [False, True], ids=["train", "test"])
def test_batch_norm_on_plain_values_stays_atens(is_test, monkeypatch):
    """The guards read statistics and maxima, not the kernel's numbers: ordinary values still run ATen's
    ``native_batch_norm`` and its backward (one call each), and their results are bit for bit ATen's."""
    need_torch()
    import torch

    from gradgen.framework.backend.torch.kernels import KERNELS
    from gradgen.framework.backend.torch.kernels import normalization

    calls = []

    class Counted:
        def __getattr__(self, name):
            def call(*args):
                calls.append(name)
                return getattr(torch.ops.aten, name)(*args)
            return call

    monkeypatch.setattr(normalization, "_aten", Counted())
    x, scale = rng.standard_normal((4, 3, 2, 2)), rng.standard_normal(3)
    forward, backward = _batch_norm_cases(x, scale, is_test, "plain")
    ops = [one_op_program(case)[1] for case in (forward, backward)]
    tensors = [torch.from_numpy(np.asarray(v)) for v in forward.inputs.values()]
    y = KERNELS["batch_norm"](ops[0])(*tensors)[0]
    fresh = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    want = torch.ops.aten.native_batch_norm(*tensors, False, 0.0, 1e-5) if is_test else \
        torch.ops.aten.native_batch_norm(*tensors[:3], *fresh, True, 1.0, 1e-5)
    assert torch.equal(y, want[0])
    KERNELS["batch_norm_grad"](ops[1])(*[torch.from_numpy(np.asarray(v)) for v in backward.inputs.values()])
    assert calls == ["native_batch_norm", "native_batch_norm_backward"] if is_test else \
        calls == ["native_batch_norm", "native_batch_norm", "native_batch_norm_backward"], calls
