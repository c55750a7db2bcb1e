"""Metric layers against counts written out in the test: accuracy with top-k, precision and recall (binary and
macro), ties and every integer label dtype; and the random layers uniform_random / gaussian_random."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, append_backward
from gradgen.program import Program, layers, program_guard
from gradgen.program.errors import ProgramError
from tests.backends.xla_harness import need_jax


def _run(make, scores, labels, label_shape):
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, scores.shape[1]], str(scores.dtype))
        y = layers.data("y", label_shape, str(labels.dtype))
        out = make(x, y)
    (value,) = Executor().run(main, feed={"x": scores, "y": labels}, fetch_list=[out])
    return value, out


def _top_k_hits(scores, labels, k):
    """Row i is a hit when fewer than k classes rank before its label (higher score, or equal score and lower index)."""
    hits = []
    for row, label in zip(scores, labels):
        before = sum(1 for c, s in enumerate(row) if s > row[label] or (s == row[label] and c < label))
        hits.append(before < k)
    return np.mean(hits)


def _per_class(scores, labels, classes):
    predicted = [int(np.flatnonzero(row == row.max())[0]) for row in scores]  # the first class on ties
    tp = [sum(1 for p, t in zip(predicted, labels) if p == t == c) for c in range(classes)]
    pp = [predicted.count(c) for c in range(classes)]
    lp = [list(labels).count(c) for c in range(classes)]
    precision = [t / n if n else 0.0 for t, n in zip(tp, pp)]
    recall = [t / n if n else 0.0 for t, n in zip(tp, lp)]
    return precision, recall


def _batch(seed, n=37, classes=5, dtype="float64", label_dtype="int64", ties=False):
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 3, (n, classes)) if ties else rng.normal(size=(n, classes)) * 7  # unnormalised
    return scores.astype(dtype), rng.integers(0, classes, n).astype(label_dtype)


@pytest.mark.parametrize("k", [1, 2, 3, 5])
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("label_dtype, label_rank", [("int64", 2), ("int32", 1), ("int64", 1)])
def test_accuracy_counts_a_row_when_its_label_is_among_the_k_best(k, ties, label_dtype, label_rank):
    scores, labels = _batch(k, ties=ties, label_dtype=label_dtype)
    feed_labels = labels.reshape(-1, 1) if label_rank == 2 else labels
    got, out = _run(lambda x, y: layers.accuracy(x, y, k=k), scores, feed_labels, [-1, 1][:label_rank] or [-1])
    assert got.dtype == np.float64 and got.shape == ()
    assert got == pytest.approx(_top_k_hits(scores, labels, k), abs=1e-15)
    assert out.stop_gradient


def test_accuracy_refuses_k_below_one_and_above_the_classes():
    with program_guard(Program(), Program()):
        x, y = layers.data("x", [-1, 4], "float32"), layers.data("y", [-1, 1], "int64")
        with pytest.raises(ProgramError, match="k >= 1"):
            layers.accuracy(x, y, k=0)
        with pytest.raises(ProgramError, match="k=5"):
            layers.accuracy(x, y, k=5)


@pytest.mark.parametrize("metric", ["precision", "recall"])
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_precision_and_recall_macro_and_per_class(metric, ties, dtype):
    classes = 5
    scores, labels = _batch(3, classes=classes, dtype=dtype, ties=ties, label_dtype="int32")
    scores[:, 4] = -100  # class 4 is never predicted: its precision is 0, not nan
    expected = dict(zip(("precision", "recall"), _per_class(scores, labels, classes)))[metric]
    layer = getattr(layers, metric)
    got, _ = _run(lambda x, y: layer(x, y, average="macro"), scores, labels, [-1])
    assert got.dtype == np.dtype(dtype) and got.shape == ()
    assert got == pytest.approx(np.mean(expected), rel=1e-6)
    for c in range(classes):
        got, _ = _run(lambda x, y: layer(x, y, average="binary", pos_label=c), scores, labels, [-1])
        assert got == pytest.approx(expected[c], rel=1e-6), c


def test_binary_precision_and_recall_of_a_two_class_batch_written_out():
    scores = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4], [0.5, 0.5]])  # predicts 1, 0, 1, 0, 0
    labels = np.array([[1], [1], [0], [0], [1]])
    precision, _ = _run(lambda x, y: layers.precision(x, y), scores, labels, [-1, 1])
    recall, _ = _run(lambda x, y: layers.recall(x, y), scores, labels, [-1, 1])
    assert precision == 0.5  # of the 2 predicted positive, 1 is
    assert recall == pytest.approx(1 / 3)  # of the 3 labelled positive, 1 was found


def test_metrics_stop_the_gradient():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 3], "float64")
        w = layers.create_parameter([3, 3], "float64", name="w")
        y = layers.data("y", [-1], "int64")
        scores = layers.matmul(x, w)
        for metric in (layers.accuracy(scores, y, k=2), layers.precision(scores, y, "macro"),
                       layers.recall(scores, y, "macro")):
            assert metric.stop_gradient
        loss = layers.reduce_sum(scores)
        assert [v.name for v, _ in append_backward(loss)] == ["w"]


def test_metric_arguments_are_checked():
    with program_guard(Program(), Program()):
        x, y = layers.data("x", [-1, 3], "float64"), layers.data("y", [-1], "int64")
        with pytest.raises(ProgramError, match="average"):
            layers.precision(x, y, average="micro")
        with pytest.raises(ProgramError, match="pos_label 3"):
            layers.recall(x, y, pos_label=3)


@pytest.mark.parametrize("layer, attrs, check", [
    ("uniform_random", {"min": 2.0, "max": 3.0}, lambda v: 2.0 <= v.min() and v.max() < 3.0),
    ("gaussian_random", {"mean": 5.0, "std": 0.5}, lambda v: abs(v.mean() - 5.0) < 0.1 and abs(v.std() - 0.5) < 0.1),
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_random_layers_sample_with_their_attrs_and_seeds(layer, attrs, check, dtype):
    def sample(seed):
        main = Program()
        with program_guard(main, Program()):
            out = getattr(layers, layer)([40, 25], dtype=dtype, seed=seed, **attrs)
        assert out.stop_gradient
        return Executor().run(main, fetch_list=[out])[0]

    a, b, c = sample(7), sample(7), sample(8)
    assert a.dtype == np.dtype(dtype) and a.shape == (40, 25)
    assert check(a)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert not np.array_equal(sample(0), c)  # seed 0 takes the program's own seed


@pytest.mark.parametrize("layer", ["uniform_random", "gaussian_random"])
@pytest.mark.parametrize("backend", ["numpy", "xla"])
def test_a_redrawing_random_layer_gives_a_new_sample_each_run_from_its_seeds_stream(layer, backend):
    """``redraw=True``: run k gives the k-th sample of the stream ``seed`` starts (one stream per plan, as
    dropout's), in block 0 and inside a loop body; the xla backend draws the numpy backend's samples."""
    if backend == "xla":
        need_jax()
    main = Program()
    with program_guard(main, Program()):
        out = getattr(layers, layer)([3, 4], dtype="float64", seed=11, redraw=True)
        fixed = getattr(layers, layer)([3, 4], dtype="float64", seed=11)

        def body(i, acc):
            return [i + 1, acc + getattr(layers, layer)([3, 4], dtype="float64", seed=12, redraw=True)]

        zero = layers.fill_constant([], "int64", 0)
        _, summed = layers.while_loop(lambda i, acc: layers.less_than(i, layers.fill_constant([], "int64", 2)),
                                      body, [zero, layers.fill_constant([3, 4], "float64", 0.0)])
    exe = Executor(backend=backend)
    runs = [exe.run(main, fetch_list=[out, fixed, summed]) for _ in range(3)]
    stream = np.random.Generator(np.random.PCG64(11))
    inner = np.random.Generator(np.random.PCG64(12))
    draw = (lambda g: g.uniform(-1.0, 1.0, (3, 4))) if layer == "uniform_random" else (lambda g: g.normal(0, 1, (3, 4)))
    for got, want_fixed in zip(runs, [draw(np.random.Generator(np.random.PCG64(11)))] * 3):
        np.testing.assert_array_equal(got[0], draw(stream))
        np.testing.assert_array_equal(got[1], want_fixed)
        np.testing.assert_allclose(got[2], draw(inner) + draw(inner), rtol=1e-15)
    assert not np.array_equal(runs[0][0], runs[1][0])


def _pairwise_auc(scores, labels, thresholds):
    """Mann-Whitney by hand: each (positive, negative) pair scores 1 when the positive's bucket is higher, 1/2 when
    equal; divided by the number of pairs (0 without both classes)."""
    buckets = [min(max(int(p * thresholds), 0), thresholds) for p in scores]
    pos = [b for b, y in zip(buckets, labels) if y != 0]
    neg = [b for b, y in zip(buckets, labels) if y == 0]
    if not pos or not neg:
        return 0.0
    return sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg) / (len(pos) * len(neg))


def _auc_program(columns, label_dtype, thresholds):
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, columns] if columns else [-1], "float32")
        y = layers.data("y", [-1, 1], label_dtype)
        total, batch, stats = layers.auc(x, y, num_thresholds=thresholds)
    return main, startup, total, batch, stats


@pytest.mark.parametrize("columns", [2, 1, 0])
@pytest.mark.parametrize("label_dtype", ["int64", "int32"])
@pytest.mark.parametrize("thresholds", [7, 4095])
def test_auc_accumulates_over_runs_and_counts_a_shared_bucket_as_half_a_pair(columns, label_dtype, thresholds):
    main, startup, total, batch, stats = _auc_program(columns, label_dtype, thresholds)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(thresholds + columns)
    seen_p, seen_y = [], []
    for step in range(3):
        p = rng.choice([0.0, 0.25, 0.5, 0.9, 1.0], 20) if step == 1 else rng.uniform(size=20)  # ties in step 1
        p = p.astype(np.float32)
        y = (rng.integers(0, 2, 20) * 3).astype(label_dtype)  # positives are labelled 3: any non-zero counts
        x = {2: np.stack([1 - p, p], 1), 1: p[:, None], 0: p}[columns]
        got_total, got_batch = exe.run(main, feed={"x": x, "y": y[:, None]}, fetch_list=[total, batch], scope=scope)
        seen_p += list(p.astype(np.float64))
        seen_y += list(y)
        assert got_batch == pytest.approx(_pairwise_auc(p.astype(np.float64), y, thresholds), abs=1e-12)
        assert got_total == pytest.approx(_pairwise_auc(seen_p, seen_y, thresholds), abs=1e-12)
    assert float(np.sum(scope[stats[0].name]) + np.sum(scope[stats[1].name])) == 60
    assert total.stop_gradient and batch.stop_gradient


def test_auc_without_both_classes_is_zero_and_bad_inputs_are_errors():
    main, startup, total, batch, _ = _auc_program(2, "int64", 10)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    p = np.array([0.2, 0.7], np.float32)
    got = exe.run(main, feed={"x": np.stack([1 - p, p], 1), "y": np.zeros((2, 1), np.int64)}, fetch_list=[total, batch],
                  scope=scope)
    assert got == [0.0, 0.0]
    with program_guard(Program(), Program()):
        y = layers.data("y", [-1, 1], "int64")
        with pytest.raises(ProgramError, match="num_thresholds >= 1"):
            layers.auc(layers.data("x", [-1, 2], "float32"), y, num_thresholds=0)
        with pytest.raises(ProgramError, match=r"\[N, 2\] class probabilities"):
            layers.auc(layers.data("z", [-1, 3], "float32"), y)
