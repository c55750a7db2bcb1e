"""The torch engine's fast ATen paths against the numpy reference where they could part from it: softmax and its
gradient, the softmax cross-entropy with hard labels (ignored rows, an ignore_index that is a class, labels out of
range, int32 labels) and the ops of one ATen call (gelu and its gradient, leaky_relu and its gradient, sigmoid,
silu; NaN and infinities, negative axes, empty batches, float16, sigmoids whose exp(-x) overflows), each fast path
taken on plain values and left otherwise, ATen's relu gradient (non-finite values), max pooling, and the one step
that computes both gradients of a convolution (only when nothing between the two ops changes what they share).
The normalizations are in ``test_torch_norms.py``, values at the float range's end in
``test_torch_extreme_values.py``."""
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


def _spoiled_at(x: np.ndarray, trouble: str | None, at: int = 1) -> np.ndarray:
    """``x`` with NaN, +inf or -inf at flat position ``at`` (none for an empty ``x``)."""
    x = x.copy()
    if trouble is not None and x.size:
        x.reshape(-1)[at % x.size] = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf}[trouble]
    return x


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


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("trouble", [None, "nan", "inf", "-inf"])
def test_gelu_sums_only_its_output_and_then_knows_its_input_finite(dtype, trouble):
    """gelu runs ATen's call on any input (``activation.ANY_VALUES``): one sum, of the output, and a finite one
    proves the input finite too, so the next kernel reading it sums nothing; an input that is not finite takes
    the compute, the input unproven."""
    need_torch()
    import torch

    from gradgen.framework.backend.torch.kernels import KERNELS, finite
    from gradgen.program import Program

    block = Program().global_block()
    block.create_var("x", [4, 64], dtype)
    block.create_var("y", [4, 64], dtype)
    op = block.append_op("gelu", {"X": ["x"]}, {"Out": ["y"]})
    from torch.utils._python_dispatch import TorchDispatchMode

    x = torch.from_numpy(_spoiled_at(rng.standard_normal((4, 64)).astype(dtype), trouble))
    kernel, sums = KERNELS["gelu"](op), []

    class Sums(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.overloadpacket.__name__ == "sum":
                sums.append("x" if args[0] is x else "other")
            return func(*args, **(kwargs or {}))

    with finite.remembered_finite(), Sums():
        y = kernel(x)
        proven = finite.all_finite(x)
    # finite: the output's sum alone; not: the output's sum, then the check's of X
    assert (sums, proven) == ((["other"], True) if trouble is None else (["other", "x"], False))
    _same_as_numpy(Case("gelu", {"X": x.numpy()}, None, label=f"{dtype} {trouble}"))
    assert y.dtype == x.dtype


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
