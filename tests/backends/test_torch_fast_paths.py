"""The torch engine's fast ATen paths against the numpy reference where they could part from it: the fused batch
norm kernels (NaN and infinities, one value per channel, rank 2, the running statistics), layer norm's gradient,
softmax, the softmax cross-entropy with hard labels (ignored rows, an ignore_index that is a class, labels out of
range, int32 labels) and the ops of one ATen call (gelu and its gradient, leaky_relu and its gradient, sigmoid,
silu), beside their forwards (NaN and infinities, negative axes, empty batches, float16, layer norm rows far from 0,
sigmoids whose exp(-x) overflows), ATen's relu gradient (non-finite values), and the one step that computes both
gradients of a convolution (only when nothing between the two ops changes what they share)."""
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


def _spoiled_at(x: np.ndarray, trouble: str | None, at: int = 1) -> np.ndarray:
    """``x`` with NaN, +inf or -inf at flat position ``at`` (none for an empty ``x``)."""
    x = x.copy()
    if trouble is not None and x.size:
        x.reshape(-1)[at % x.size] = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf}[trouble]
    return x


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


def _as_the_compute(case: Case) -> None:
    """The torch engine gives the numbers of the op's compute bit for bit (the fast path stood aside), and
    numpy's to float16's rounding: the two engines compute float16 with the same formulas, each rounding every
    operation to float16, but for the sums (torch's float32 accumulator), which part them by an ulp here and there
    on any path."""
    import torch

    from gradgen.framework.backend.torch.kernels import XP
    from gradgen.framework.backend.torch.kernels.derived import computed_kernel
    from gradgen.program import OP_SCHEMAS
    main, op, feed = one_op_program(case)
    fetch = [n for names in op.outputs.values() for n in names]
    got = run_on("torch", main, feed, fetch)
    assert not isinstance(got, Exception), got
    arrays = [torch.from_numpy(feed[op.input(s.name)[0]]) for s in OP_SCHEMAS[case.op].inputs if op.input(s.name)]
    derived = computed_kernel(OP_SCHEMAS[case.op], XP)(op)(*arrays)
    for name, g, d in zip(fetch, got, derived if isinstance(derived, tuple) else (derived,)):
        np.testing.assert_array_equal(g, d.numpy(), err_msg=f"{case.op} {case.label} {name}")
    for name, g, w in zip(fetch, got, run_on("numpy", main, feed, fetch)):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(np.isfinite(g), np.isfinite(w), err_msg=f"{case.op} {case.label} {name}")
        finite = np.isfinite(w)
        scale = max(1.0, float(np.max(np.abs(w[finite]), initial=0.0)))
        np.testing.assert_allclose(g[finite], w[finite], rtol=2e-3, atol=2e-3 * scale, err_msg=f"{case.label}")


@pytest.mark.parametrize("shape", [(4, 3, 8), (0, 3, 8)], ids=["rank3", "empty"])
@pytest.mark.parametrize("trouble", [None, "nan", "inf"])
def test_float16_takes_each_ops_compute(shape, trouble):
    need_torch()
    half = lambda a: a.astype("float16")
    x = _spoiled_at(half(rng.standard_normal(shape) * 2), trouble)
    dy = half(rng.standard_normal(shape))
    label = f"float16 {shape} {trouble}"
    for begin in (-1, 1):
        attrs = {"begin_norm_axis": begin, "epsilon": 1e-5}
        norm = {"Scale": half(rng.standard_normal(shape[begin:]))}
        _as_the_compute(Case("layer_norm", {"X": x, **norm, "Bias": norm["Scale"]}, None, attrs, label=label))
        _as_the_compute(Case("layer_norm_grad", {"X": x, **norm, "Y@GRAD": dy}, None, attrs,
                             {"Scale@GRAD": 1, "Bias@GRAD": 1}, label=label))
    for axis in (-1, 1):
        _as_the_compute(Case("softmax", {"X": x}, None, {"axis": axis}, label=label))
        out = half(np.abs(rng.standard_normal(shape)) / 8)
        _as_the_compute(Case("softmax_grad", {"Out": out, "Out@GRAD": x}, None, {"axis": axis}, label=label))
    _as_the_compute(Case("gelu_grad", {"X": x, "Out@GRAD": dy}, None, label=label))
    _as_the_compute(Case("gelu_grad", {"X": dy, "Out@GRAD": x}, None, label=label))
    _as_the_compute(Case("gelu", {"X": x}, None, label=label))


SOFTMAXED = [((6, 5), -1), ((6, 5), 0), ((3, 4, 5), 1), ((3, 4, 5), -2), ((2, 3, 4, 5), -1), ((2, 3, 4, 5), 1),
             ((0, 4, 5), -1), ((3, 0, 5), 1), ((4, 1), -1)]
"""(shape, axis) for softmax and its gradient: ranks 2-4, negative axes, an empty batch, an empty axis, one value
along the axis."""


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,axis", SOFTMAXED, ids=[f"{s}@{a}" for s, a in SOFTMAXED])
@pytest.mark.parametrize("trouble", [None, "nan", "inf", "-inf"])
def test_softmax_and_its_gradient_on_aten_equal_numpys(dtype, shape, axis, trouble):
    need_torch()
    label = f"{dtype} {shape} axis={axis} {trouble}"
    x = _spoiled_at((rng.standard_normal(shape) * 4).astype(dtype), trouble)
    _same_as_numpy(Case("softmax", {"X": x}, None, {"axis": axis}, label=label))
    with np.errstate(all="ignore"):  # a softmax of X (NaN where X is not finite) for Out
        e = np.exp(x.astype("float64") - np.max(x.astype("float64"), axis=axis, keepdims=True)) if x.size else x
        out = (e / np.sum(e, axis=axis, keepdims=True)).astype(dtype) if x.size else x
    dout = rng.standard_normal(shape).astype(dtype)
    for spoiled_out, spoiled_dout in ((out, dout), (out, _spoiled_at(dout, trouble, at=2))):
        _same_as_numpy(Case("softmax_grad", {"Out": spoiled_out, "Out@GRAD": spoiled_dout}, None, {"axis": axis},
                            label=label))
    big = (rng.standard_normal(shape) * 1e37).astype(dtype)  # float32's sums could overflow: the compute's path
    _same_as_numpy(Case("softmax_grad", {"Out": big, "Out@GRAD": big}, None, {"axis": axis}, label=f"{label} big"))


LABELLED = [((6, 5), -1, True), ((6, 5), -1, False), ((6, 5), 0, True), ((3, 4, 5), 1, True), ((3, 4, 5), -2, False),
            ((4, 1), -1, True), ((0, 5), -1, True)]
"""(logits shape, axis, whether the label keeps the class axis as size 1) for the softmax cross-entropy with hard
labels: negative axes, the class axis first or inside, one class, an empty batch."""


def _hard_labels(shape, axis: int, kept_axis: bool, dtype: str, low: int = 0) -> np.ndarray:
    axis = axis % len(shape)
    label_shape = tuple(1 if i == axis else d for i, d in enumerate(shape)) if kept_axis else \
        tuple(d for i, d in enumerate(shape) if i != axis)
    return rng.integers(low, shape[axis], size=label_shape).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,axis,kept_axis", LABELLED, ids=[f"{s}@{a}{'' if k else '-squeezed'}"
                                                                 for s, a, k in LABELLED])
@pytest.mark.parametrize("label_dtype", ["int64", "int32"])
@pytest.mark.parametrize("trouble", [None, "nan", "inf"])
def test_softmax_cross_entropy_with_hard_labels_on_aten_equals_numpys(dtype, shape, axis, kept_axis, label_dtype,
                                                                      trouble):
    need_torch()
    logits = _spoiled_at((rng.standard_normal(shape) * 4).astype(dtype), trouble)
    label = _hard_labels(shape, axis, kept_axis, label_dtype)
    for ignore_index, label_here in ((-100, label), (0, label)):  # -100 is no class; 0 is, and its rows give 0
        _same_as_numpy(Case("softmax_with_cross_entropy", {"Logits": logits, "Label": label_here}, None,
                            {"axis": axis, "soft_label": False, "ignore_index": ignore_index},
                            label=f"{dtype} {shape} axis={axis} {label_dtype} {trouble} ignore={ignore_index}"))
    if label.size:
        ignored = label.copy()
        ignored.reshape(-1)[0] = -100  # an ignored row: the compute's path, loss 0 there
        _same_as_numpy(Case("softmax_with_cross_entropy", {"Logits": logits, "Label": ignored}, None,
                            {"axis": axis, "soft_label": False, "ignore_index": -100}, label="an ignored row"))


@pytest.mark.parametrize("bad", [-1, 5, -100])
def test_softmax_cross_entropy_refuses_a_label_outside_the_classes_as_numpy_does(bad):
    """A label outside [0, classes) that is not ignore_index fails the run on both engines, naming the value."""
    need_torch()
    logits = rng.standard_normal((6, 5)).astype("float32")
    label = _hard_labels((6, 5), -1, True, "int64")
    label[3, 0] = bad
    main, op, feed = one_op_program(Case("softmax_with_cross_entropy", {"Logits": logits, "Label": label}, None,
                                         {"axis": -1, "soft_label": False, "ignore_index": 7}))
    fetch = [n for names in op.outputs.values() for n in names]
    errors = [run_on(engine, main, feed, fetch) for engine in ("numpy", "torch")]
    for error in errors:
        assert isinstance(error, Exception) and f"label {bad} at index [3, 0] is outside [0, 5)" in str(error), error


def test_softmax_cross_entropy_with_a_label_of_another_rank_gets_the_computes_message():
    """A label whose rank is neither the logits' nor one less (possible at run time with -1 dims declared) is not
    reshaped for the gather: the kernel raises the compute's message."""
    need_torch()
    import torch

    from gradgen.framework.backend.torch.kernels import KERNELS
    logits = rng.standard_normal((6, 5)).astype("float32")
    _, op, _ = one_op_program(Case("softmax_with_cross_entropy",
                                   {"Logits": logits, "Label": _hard_labels((6, 5), -1, True, "int64")}, None,
                                   {"axis": -1, "soft_label": False, "ignore_index": -100}))
    with pytest.raises(ValueError, match=r"Label has run-time shape \[\], but Logits \[6, 5\] needs"):
        KERNELS["softmax_with_cross_entropy"](op)(torch.from_numpy(logits), torch.tensor(3))


GELU_SHAPES = [(6, 5), (3, 4, 5), (2, 3, 4, 5), (0, 4), (3, 0, 2)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", GELU_SHAPES, ids=[str(s) for s in GELU_SHAPES])
@pytest.mark.parametrize("x_trouble,dout_trouble", [(None, None), ("nan", None), ("inf", None), ("-inf", None),
                                                    (None, "nan"), (None, "inf")])
def test_gelu_gradient_on_aten_equals_numpys(dtype, shape, x_trouble, dout_trouble):
    need_torch()
    x = rng.standard_normal(shape) * 3
    if x.size >= 4:
        x.reshape(-1)[:4] = [-12.0, -5.0, 0.0, 30.0]  # Phi(x) 0 and 1, x phi(x) underflowing
    x = _spoiled_at(x.astype(dtype), x_trouble)
    dout = _spoiled_at(rng.standard_normal(shape).astype(dtype), dout_trouble)
    label = f"{dtype} {shape} {x_trouble} {dout_trouble}"
    _same_as_numpy(Case("gelu_grad", {"X": x, "Out@GRAD": dout}, None, label=label))
    if dout_trouble is None:
        _same_as_numpy(Case("gelu", {"X": x}, None, label=label))


ONE_CALL = ["leaky_relu", "leaky_relu_grad", "sigmoid", "silu"]
"""The ops besides gelu's two that run as one ATen call (``activation.ATEN``)."""


def _one_call_case(op_type: str, x: np.ndarray, dout: np.ndarray, label: str) -> Case:
    if op_type == "leaky_relu_grad":
        return Case(op_type, {"X": x, "Out@GRAD": dout}, None, {"alpha": 0.2}, label=label)
    return Case(op_type, {"X": x}, None, {"alpha": 0.2} if op_type == "leaky_relu" else {}, label=label)


@pytest.mark.parametrize("op_type", ONE_CALL)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", GELU_SHAPES, ids=[str(s) for s in GELU_SHAPES])
@pytest.mark.parametrize("trouble", [None, "nan", "inf", "-inf", "dout-nan"])
def test_the_ops_of_one_aten_call_equal_numpys(op_type, dtype, shape, trouble):
    """Over the whole range: exp(-x) overflowing in each dtype (-100 and -1000: the compute's tiny values, where
    ATen's sigmoid would give 0), just inside it, 0, both signs of tiny values, and NaN and infinities."""
    need_torch()
    x = rng.standard_normal(shape) * 3
    ends = [-1000.0, -100.0, -87.0, -0.0, 1e-30, -1e-30, 30.0, 1000.0]
    if x.size >= len(ends):
        x.reshape(-1)[:len(ends)] = ends
    x = _spoiled_at(x.astype(dtype), None if trouble == "dout-nan" else trouble)
    dout = _spoiled_at(rng.standard_normal(shape).astype(dtype), "nan" if trouble == "dout-nan" else None)
    _same_as_numpy(_one_call_case(op_type, x, dout, f"{dtype} {shape} {trouble}"))


SOFTMAX_GRAD_SHAPES = [((6, 5), -1), ((6, 5), 0), ((3, 4, 5), 1), ((2, 3, 4, 5), -2), ((1, 1), -1), ((0, 4), -1),
                       ((3, 0, 2), 1), ((4,), 0)]
"""(Out's shape, axis): ranks 1-4, the softmax axis first, inner and last, rows of one value, empty tensors."""


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,axis", SOFTMAX_GRAD_SHAPES, ids=[f"{s}-{a}" for s, a in SOFTMAX_GRAD_SHAPES])
@pytest.mark.parametrize("trouble", [None, "out-nan", "dout-nan", "dout-inf", "dout-huge", "not-a-softmax"])
def test_softmax_gradient_on_aten_equals_numpys(dtype, shape, axis, trouble):
    """``softmax_grad`` on ATen's ``_softmax_backward_data`` where Out and Out@GRAD are finite, the compute where
    not: NaN and infinities, gradients near the dtype's end (where a row's sum of Out@GRAD * Out overflows in both),
    and an Out that is no softmax (negative, over 1: the op takes any values)."""
    need_torch()
    logits = rng.standard_normal(shape) * 3
    out = np.exp(logits - logits.max(axis=axis, keepdims=True)) if logits.size else logits
    out = out / out.sum(axis=axis, keepdims=True) if out.size else out
    dout = rng.standard_normal(shape)
    if trouble == "dout-huge" and dout.size:
        dout.reshape(-1)[:2] = np.finfo(dtype).max / 2
    if trouble == "not-a-softmax":
        out = rng.standard_normal(shape) * 10
    out = _spoiled_at(out.astype(dtype), "nan" if trouble == "out-nan" else None)
    dout = _spoiled_at(dout.astype(dtype), {"dout-nan": "nan", "dout-inf": "inf"}.get(trouble))
    _same_as_numpy(Case("softmax_grad", {"Out": out, "Out@GRAD": dout}, None, {"axis": axis},
                        label=f"{dtype} {shape} {axis} {trouble}"))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_log_of_a_sigmoid_far_below_zero_stays_finite_on_both_engines(dtype):
    """What the stand-aside at exp's overflow keeps: log(sigmoid(x)) at x = -100 (float32) or -740 (float64) is
    about x on the reference, and would be -inf from ATen's 0."""
    need_torch()
    from gradgen.program import Program, layers, program_guard
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", shape=[-1, 3], dtype=dtype)
        out = layers.log(layers.sigmoid(x))
    far = -100.0 if dtype == "float32" else -740.0
    feed = {"x": np.array([[far, -1.0, 2.0]] * 2, dtype)}
    want, got = (run_on(backend, main, feed, [out])[0] for backend in ("numpy", "torch"))
    assert np.isfinite(want).all() and want[0, 0] < far / 2
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_fast_paths_run_on_plain_values_and_stand_aside_otherwise(dtype):
    """The tests above would pass with no fast path at all: here each kernel gives ATen's numbers bit for bit on
    plain values, and the compute's on a NaN, an infinity, a layer norm row far from 0 and a sigmoid whose exp(-x)
    overflows."""
    need_torch()
    import torch

    from gradgen.framework.backend.torch.kernels import KERNELS, XP
    from gradgen.framework.backend.torch.kernels.derived import computed_kernel
    from gradgen.program import OP_SCHEMAS
    aten, t = torch.ops.aten, lambda a: torch.from_numpy(np.ascontiguousarray(a))
    x, dy, w = (rng.standard_normal(s).astype(dtype) for s in ((4, 6, 8), (4, 6, 8), (8,)))
    label = _hard_labels((4, 6, 8), 1, True, "int64")
    cases = [(Case("softmax", {"X": x}, None, {"axis": -2}), lambda: aten._softmax(t(x), 1, False)),
             (Case("softmax_with_cross_entropy", {"Logits": x, "Label": label}, None,
                   {"axis": 1, "soft_label": False, "ignore_index": -100}),
              lambda: aten._log_softmax(t(x), 1, False).exp()),
             (Case("gelu_grad", {"X": x, "Out@GRAD": dy}, None), lambda: aten.gelu_backward(t(dy), t(x))),
             (Case("gelu", {"X": x}, None), lambda: aten.gelu(t(x))),
             (Case("softmax_grad", {"Out": x, "Out@GRAD": dy}, None, {"axis": 1}),
              lambda: aten._softmax_backward_data(t(dy), t(x), 1, t(x).dtype)),
             (_one_call_case("leaky_relu", x, dy, ""), lambda: aten.leaky_relu(t(x), 0.2)),
             (_one_call_case("leaky_relu_grad", x, dy, ""), lambda: aten.leaky_relu_backward(t(dy), t(x), 0.2, False)),
             (_one_call_case("sigmoid", x, dy, ""), lambda: aten.sigmoid(t(x))),
             (_one_call_case("silu", x, dy, ""), lambda: aten.silu(t(x))),
             (Case("layer_norm", {"X": x, "Scale": w, "Bias": w}, None, {"begin_norm_axis": 2}),
              lambda: aten.native_layer_norm(t(x), [8], t(w), t(w), 1e-5)[0]),
             (Case("layer_norm_grad", {"X": x, "Scale": w, "Y@GRAD": dy}, None, {"begin_norm_axis": 2}),
              lambda: aten.native_layer_norm_backward(t(dy), t(x), [8], *aten.native_layer_norm(t(x), [8], None, None,
                                                                                                1e-5)[1:],
                                                      t(w), None, [True, False, False])[0])]
    for case, by_aten in cases:
        _, op, feed = one_op_program(case)
        arrays = [t(feed[op.input(s.name)[0]]) for s in OP_SCHEMAS[case.op].inputs if op.input(s.name)]
        got = KERNELS[case.op](op)(*arrays)
        assert torch.equal(got[0] if isinstance(got, tuple) else got, by_aten()), case.op
        first = case.inputs[next(iter(case.inputs))]
        spoiled = [_spoiled_at(first, "nan"), _spoiled_at(first, "inf")]
        if case.op.startswith("layer_norm"):
            far = first.copy()
            far[0, 0] += 1000.0  # one row's mean ~1000 standard deviations from 0
            spoiled.append(far)
        if case.op == "layer_norm":
            flat = first.copy()
            flat[1, 2] = 0.5 + 1e-4 * flat[1, 2]  # one row's variance under epsilon: Variance not from ATen's rstd
            spoiled.append(flat)
        if case.op in ("sigmoid", "silu"):
            far = first.copy()
            far[0, 0, 0] = -1000.0  # exp(-x) overflows: ATen's 1 / (1 + exp(-x)) would give 0
            spoiled.append(far)
        for bad in spoiled:
            _, op, feed = one_op_program(Case(case.op, {**case.inputs, next(iter(case.inputs)): bad}, None, case.attrs))
            arrays = [t(feed[op.input(s.name)[0]]) for s in OP_SCHEMAS[case.op].inputs if op.input(s.name)]
            got, want = KERNELS[case.op](op)(*arrays), computed_kernel(OP_SCHEMAS[case.op], XP)(op)(*arrays)
            for g, d in zip(*(r if isinstance(r, tuple) else (r,) for r in (got, want))):
                assert torch.equal(g.isnan(), d.isnan()) and torch.equal(g.nan_to_num(), d.nan_to_num()), case.op


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


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_layer_norms_gradient_reads_the_statistics_its_forward_kept(dtype, monkeypatch):
    """``kept``: in a run with layer norm's forward and gradient over one X, ATen's ``native_layer_norm`` runs once
    (the forward's mean and rstd serve the gradient); a gradient whose X no forward saw makes its own. Both give the
    reference's numbers."""
    need_torch()
    import torch

    from gradgen.framework import append_backward
    from gradgen.framework.backend.torch.kernels import network
    from gradgen.program import Program, layers, program_guard

    calls = []

    class Counting:
        def __getattr__(self, name):
            found = getattr(torch.ops.aten, name)
            return (lambda *a, **k: calls.append(name) or found(*a, **k)) if name == "native_layer_norm" else found

    monkeypatch.setattr(network, "_aten", Counting())
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 6, 8], dtype)
        x.stop_gradient = False
        y = layers.layer_norm(x, begin_norm_axis=-1, name="ln")
        loss = layers.reduce_sum(layers.square(y))
        append_backward(loss)
    feed = {"x": (rng.standard_normal((3, 6, 8)) * 2 + 0.5).astype(dtype)}
    scale, bias = (rng.standard_normal(8).astype(dtype) for _ in range(2))
    (grad_op,) = [op for op in main.global_block().ops if op.type == "layer_norm_grad"]
    fetches = [y.name, grad_op.output("X@GRAD")[0], grad_op.output("Scale@GRAD")[0]]
    params = {"ln.scale": scale, "ln.bias": bias}
    got = run_on("torch", main, feed, fetches, params)
    assert calls == ["native_layer_norm"], got
    assert_same(run_on("numpy", main, feed, fetches, params), got, fetches, "forward and gradient")
    calls.clear()
    dy = rng.standard_normal((3, 6, 8)).astype(dtype)
    case = Case("layer_norm_grad", {"X": feed["x"], "Scale": scale, "Y@GRAD": dy}, None,
                {"begin_norm_axis": -1, "epsilon": 1e-5})
    _same_as_numpy(case)
    assert calls == ["native_layer_norm"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fraction", [0.49, 0.51, 0.75, 1.0])
def test_gelu_over_half_the_largest_float_equals_numpys(dtype, fraction):
    """ATen's float32 gelu kernel over a vector's lanes forms x (1 + erf(x / sqrt 2)) before halving: inf for x over
    half the largest float, where the compute's x Phi(x) is x. One such value among ordinary ones (their sum
    finite, so the finiteness check lets ATen's call run), in a tensor long enough for the vector kernel: the
    reference's numbers, and its gradient's."""
    need_torch()
    x = rng.standard_normal((4, 64)).astype(dtype)
    x[1, 37] = np.finfo(dtype).max * fraction
    _same_as_numpy(Case("gelu", {"X": x}, None, label=f"{dtype} {fraction}"))
    _same_as_numpy(Case("gelu_grad", {"X": x, "Out@GRAD": rng.standard_normal((4, 64)).astype(dtype)}, None,
                        label=f"{dtype} {fraction}"))


@pytest.mark.parametrize("activation", ["gelu", "sigmoid", "silu"])
def test_an_activation_whose_aten_output_is_finite_is_not_summed_again(activation, monkeypatch):
    """``OpSchema.aten_finite_out``: the product reading gelu's, sigmoid's or silu's output of a finite input does
    not sum it (it sums only the weight); the numbers are the reference's."""
    need_torch()
    import torch

    from gradgen.framework.backend.torch.kernels import finite, linalg
    from gradgen.program import Program, layers, program_guard

    monkeypatch.setattr(linalg, "torch_is_faster", lambda threads: True)
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 40], "float32")
        w = layers.data("w", [40, 3], "float32")
        hidden = getattr(layers, activation)(x)
        out = layers.matmul(hidden, w)
    summed, own = [], torch.sum
    monkeypatch.setattr(finite.torch, "sum", lambda t, *more, **named: (
        summed.append(tuple(t.shape)) if not (more or named) else None) or own(t, *more, **named))
    feed = {"x": rng.standard_normal((6, 40)).astype("float32") * 3,
            "w": rng.standard_normal((40, 3)).astype("float32")}
    got = run_on("torch", main, feed, [out.name])
    assert_same(run_on("numpy", main, feed, [out.name]), got, [out.name], activation)
    assert summed == [(6, 40), (40, 3)], summed  # x (the activation's own check) and w; not the activation's output


def _ends(dtype: str) -> list[float]:
    most = float(np.finfo(dtype).max)
    return [most, -most, most / 2, -most / 2, most / 1.5, most / 3, most / 8, most / 100, float(np.finfo(dtype).tiny),
            -float(np.finfo(dtype).tiny), 700.0, -700.0, 88.0, -88.0, 1e-30]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("at", range(15))
def test_every_aten_fast_path_meets_one_extreme_value_as_numpy_does(dtype, at):
    """One value near an end of the float range (``_ends``) among 63 ordinary ones: their sum stays finite, so the
    finiteness checks let ATen's calls run, and the tensor is long enough for ATen's vector kernels (a short one
    runs the scalar kernel, which rounds otherwise: gelu's float32 vector kernel overflowed over half the largest
    float, its scalar kernel did not). Every fast path (the ops of one ATen call, softmax, relu's gradient, layer
    norm) against the reference, the value in X and in the output gradient."""
    need_torch()
    extreme = _ends(dtype)[at]
    spoiled = rng.standard_normal((4, 16)).astype(dtype)
    spoiled[1, 3] = extreme
    plain = rng.standard_normal((4, 16)).astype(dtype)
    norm = {"begin_norm_axis": 1, "epsilon": 1e-5}
    cases = [Case("gelu", {"X": spoiled}, None), Case("gelu_grad", {"X": spoiled, "Out@GRAD": plain}, None),
             Case("gelu_grad", {"X": plain, "Out@GRAD": spoiled}, None), Case("sigmoid", {"X": spoiled}, None),
             Case("silu", {"X": spoiled}, None), Case("leaky_relu", {"X": spoiled}, None, {"alpha": 0.2}),
             Case("leaky_relu_grad", {"X": spoiled, "Out@GRAD": plain}, None, {"alpha": 0.2}),
             Case("leaky_relu_grad", {"X": plain, "Out@GRAD": spoiled}, None, {"alpha": 0.2}),
             Case("softmax", {"X": spoiled}, None, {"axis": -1}),
             Case("softmax_grad", {"Out": np.abs(plain) / 10, "Out@GRAD": spoiled}, None, {"axis": -1}),
             Case("relu_grad", {"Out": np.maximum(spoiled, 0), "Out@GRAD": plain}, None),
             Case("relu_grad", {"Out": np.maximum(plain, 0), "Out@GRAD": spoiled}, None),
             Case("layer_norm", {"X": spoiled}, None, norm), Case("layer_norm_grad", {"X": plain, "Y@GRAD": spoiled},
                                                                  None, norm)]
    for case in cases:
        _same_as_numpy(Case(case.op, case.inputs, None, case.attrs, label=f"{dtype} {extreme}"))


@pytest.mark.parametrize("seed", [1, 10, 11])
def test_batch_norms_gradient_where_aten_overflows_takes_the_compute(seed, monkeypatch):
    """A float64 X holding the largest float: the compute's dX is finite there (1e308), ATen's formula overflowed
    to inf (in 77 of 200 such draws); the kernel sees its result is not finite and gives the reference's. Beside
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


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("at", range(15))
def test_remainders_and_running_products_meet_one_extreme_value_as_numpy_does(dtype, at):
    """The torch engine's ``xp``: torch's vector remainder and fmod gave NaN where X / Y overflows (a float32 X of
    3.4e38 over 0.37), and its running sums and products accumulate float32 in float64, so a running product that
    overflows and comes back in range was finite again (reduce_prod's gradient, ``prod_others``). One extreme
    value among 63 ordinary ones, against the reference."""
    need_torch()
    extreme = _ends(dtype)[at]
    spoiled = rng.standard_normal((4, 16)).astype(dtype)
    spoiled[1, 3] = extreme
    plain = rng.standard_normal((4, 16)).astype(dtype)
    positive = np.abs(plain) + np.asarray(0.1, dtype)
    cases = [Case("elementwise_mod", {"X": spoiled, "Y": positive}, None, {"fmod": fmod}) for fmod in (False, True)]
    cases += [Case("elementwise_mod", {"X": plain, "Y": spoiled}, None, {"fmod": False}),
              Case("prod_others", {"X": spoiled}, None, {"dim": [1]}),
              Case("cumsum", {"X": spoiled}, None, {"axis": -1}), Case("cumsum", {"X": spoiled}, None, {"axis": 0}),
              Case("reduce_prod", {"X": spoiled / 2}, None, {"dim": [1]})]
    for case in cases:
        _same_as_numpy(Case(case.op, case.inputs, None, case.attrs, label=f"{dtype} {extreme}"))
