"""The nn and conv families on the xla backend where the shared op cases do not reach: ignored and out-of-range
hard labels, a class axis other than the last, ceil-mode and exclusive pooling gradients, max pooling's ties,
NaNs and infinities, an empty batch; and whole training steps of a small conv net against the numpy backend."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import ExecutionError, Executor, Scope, optimizer
from gradgen.program import Program, layers, program_guard
from tests.backends.xla_harness import assert_same, need_jax, run_both
from tests.framework.op_harness import Case, one_op_program

rng = np.random.default_rng(7)
FLOATS = ("float32", "float64")


def randn(shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def _label_cases():
    for dtype in FLOATS:
        probs = rng.uniform(0.1, 1.0, (4, 5)).astype(dtype)
        ignored = np.array([[2], [-100], [4], [-100]], np.int64)
        yield Case("cross_entropy", {"X": probs, "Label": ignored}, None, {"ignore_index": -100}, label="ignored")
        yield Case("cross_entropy", {"X": probs, "Label": np.array([0, 3, 3, 1], np.int32)}, None,
                   {"ignore_index": 3}, label="ignored,int32")
        logits = randn((2, 5, 3), dtype) * 3
        for axis in (1, -2):
            hard = np.array([[0, 4, -1], [2, -1, 1]], np.int64)
            yield Case("softmax_with_cross_entropy", {"Logits": logits, "Label": hard}, None,
                       {"axis": axis, "ignore_index": -1}, label=f"axis={axis},ignored")
            yield Case("softmax_with_cross_entropy", {"Logits": logits, "Label": hard[:, None, :].clip(0)}, None,
                       {"axis": axis}, label=f"axis={axis},kept dim")
            soft = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
            yield Case("softmax_with_cross_entropy", {"Logits": logits, "Label": soft}, None,
                       {"axis": axis, "soft_label": True}, label=f"axis={axis},soft")


def _pool_cases():
    for dtype in FLOATS:
        x = np.round(randn((2, 2, 5, 6), dtype))  # many ties
        for kind, exclusive in (("max", True), ("avg", True), ("avg", False)):
            for k, s, p, ceil in (((3, 3), (2, 2), [1, 0, 0, 1], True), ((2, 3), (2, 2), [0, 0], True),
                                  ((2, 2), (1, 2), [1, 1], False)):
                attrs = {"pooling_type": kind, "ksize": list(k), "strides": list(s), "paddings": p,
                         "exclusive": exclusive, "ceil_mode": ceil}
                out = Executor().run(*_one(Case("pool2d", {"X": x}, None, attrs)), scope=Scope())[0]
                label = f"{kind},excl={exclusive},ceil={ceil},k={k}"
                yield Case("pool2d_grad", {"X": x, "Out@GRAD": randn(out.shape, dtype)}, None, attrs, label=label)
                if kind == "max":
                    yield Case("pool2d_select", {"X": x, "D": randn(x.shape, dtype)}, None, attrs, label=label)
        odd = np.array([[[[1.0, np.nan, 2.0, np.nan], [np.nan, 0.0, -np.inf, -np.inf],
                          [3.0, 3.0, -np.inf, -np.inf], [3.0, 3.0, 5.0, 5.0]]]], dtype)
        attrs = {"pooling_type": "max", "ksize": [2, 2], "strides": [2, 2], "paddings": [1, 1]}
        gout = np.array([[[[1.0, 2.0, np.inf], [3.0, -np.inf, 4.0], [5.0, 6.0, 7.0]]]], dtype)
        yield Case("pool2d", {"X": odd}, None, attrs, label="nan,-inf")
        yield Case("pool2d_grad", {"X": odd, "Out@GRAD": gout}, None, attrs, label="nan,-inf,inf grads")
        yield Case("pool2d_select", {"X": odd, "D": randn(odd.shape, dtype)}, None, attrs, label="nan,-inf")


def _norm_cases():
    for dtype in FLOATS:
        stats = {"Scale": randn((3,), dtype), "Bias": randn((3,), dtype), "Mean": randn((3,), dtype),
                 "Variance": rng.uniform(0.5, 2, 3).astype(dtype)}
        yield Case("batch_norm", {"X": np.zeros((0, 3, 2), dtype), **stats}, None, {"momentum": 0.8},
                   label="empty batch")
        yield Case("batch_norm", {"X": randn((2, 3), dtype), **stats}, None, {"momentum": 0.7}, label="rank 2")
        yield Case("layer_norm_grad", {"X": randn((3, 4), dtype), "Scale": randn((4,), dtype),
                                       "Y@GRAD": randn((3, 4), dtype)}, None, {}, {"Scale@GRAD": 1, "Bias@GRAD": 1},
                   label="both grads")


def _one(case: Case):
    main, op, feed = one_op_program(case)
    return main, feed, [n for names in op.outputs.values() for n in names]


CASES = [*_label_cases(), *_pool_cases(), *_norm_cases()]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_xla_matches_numpy_at_the_edges(case: Case):
    need_jax()
    main, feed, fetch = _one(case)
    with np.errstate(invalid="ignore"):  # inf/NaN gradients make NaN shares on purpose: numpy's 0 * inf
        want, got = run_both(main, feed, fetch)
    assert not isinstance(want, Exception), want
    assert_same(want, got, fetch, case.id)


@pytest.mark.parametrize("op_type,logits_slot", [("cross_entropy", "X"), ("softmax_with_cross_entropy", "Logits")])
@pytest.mark.parametrize("bad", [5, -1, -101])
def test_a_label_out_of_range_fails_the_run_on_both_backends(op_type, logits_slot, bad):
    need_jax()
    label = np.array([[1], [bad], [0]], np.int64)
    case = Case(op_type, {logits_slot: rng.uniform(0.1, 1, (3, 5)), "Label": label}, None, {"ignore_index": -100})
    main, feed, fetch = _one(case)
    want, got = run_both(main, feed, fetch)
    assert isinstance(want, ExecutionError) and isinstance(got, ExecutionError), (want, got)
    assert "outside [0, 5)" in str(got) and op_type in str(got)


def test_a_label_of_the_wrong_run_time_shape_is_refused_on_both_backends():
    """-1 dims met at run time: a label batch that does not match the logits' is refused (numpy would broadcast)."""
    need_jax()
    main = Program()
    block = main.global_block()
    block.create_var("logits", [-1, 5], "float64")
    block.create_var("label", [-1, 5], "float64")
    op = block.append_op("softmax_with_cross_entropy", {"Logits": ["logits"], "Label": ["label"]},
                         {"Softmax": ["p"], "Loss": ["loss"]}, {"soft_label": True})
    feed = {"logits": randn((3, 5), "float64"), "label": rng.uniform(0, 1, (1, 5))}
    want, got = run_both(main, feed, op.output("Loss"))
    assert isinstance(want, ExecutionError) and isinstance(got, ExecutionError), (want, got)
    assert "Label has run-time shape [1, 5]" in str(got)


def _conv_net(dtype: str):
    """conv (grouped, strided, dilated) -> batch_norm -> relu -> max pool (ceil) -> transposed conv -> avg pool
    -> spatial mean -> fc -> softmax cross-entropy with soft labels, trained by SGD. (No conv biases and no
    hard labels: their reshapes and one_hot belong to the tensor family, lowered elsewhere.)"""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 4, 9, 8], dtype)
        y = layers.data("y", [-1, 5], dtype)
        h = layers.conv2d(x, 6, 3, stride=[2, 1], padding=1, dilation=[1, 2], groups=2, bias=False, name="c1")
        h = layers.relu(layers.batch_norm(h, momentum=0.7, name="bn"))
        h = layers.pool2d(h, 2, "max", stride=2, ceil_mode=True)
        h = layers.conv2d_transpose(h, 4, 3, stride=2, padding=1, output_padding=1, bias=False, name="ct")
        h = layers.pool2d(h, 3, "avg", stride=2, padding=1, exclusive=False)
        logits = layers.fc(layers.reduce_mean(h, dim=[2, 3]), 5, name="fc")
        loss = layers.mean(layers.softmax_with_cross_entropy(logits, y, soft_label=True), name="loss")
        optimizer.SGD(learning_rate=0.1).minimize(loss)
    return main, startup, loss


@pytest.mark.parametrize("dtype", FLOATS)
def test_conv_net_trains_alike_on_both_backends(dtype):
    """Three steps: the loss each step, then every parameter and the running statistics (batch_norm's MeanOut
    and VarianceOut committed to the scope by the compiled step)."""
    need_jax()
    main, startup, loss = _conv_net(dtype)
    labels = rng.uniform(0, 1, (6, 5))
    feed = {"x": np.round(randn((6, 4, 9, 8), dtype), 1), "y": (labels / labels.sum(1, keepdims=True)).astype(dtype)}
    scopes, losses = {}, {}
    for backend in ("numpy", "xla"):
        scope = Scope()
        Executor().run(startup, scope=scope)
        exe = Executor(backend=backend)
        losses[backend] = [exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0] for _ in range(3)]
        scopes[backend] = scope
    assert_same(losses["numpy"], losses["xla"], ["loss"] * 3, "loss")
    names = sorted(scopes["numpy"].keys())
    assert len([n for n in names if "bn" in n]) >= 4
    assert_same([scopes["numpy"][n] for n in names], [scopes["xla"][n] for n in names], names, "scope")
