"""The metric ops over their whole input domain, on the numpy and the xla backend: each layer is one op; int32 and
int64 labels of shape [N] and [N, 1], ties, k up to and past the class count, empty batches, NaN scores, float32
and float64 scores, -1 dims met at run time; auc over several runs against the Mann-Whitney statistic of every
score seen; and no gradient or tangent through a metric."""
from __future__ import annotations

import re

import numpy as np
import pytest
from scipy.stats import rankdata

from gradgen.framework import ExecutionError, Executor, Scope, forward_gradients, gradients
from gradgen.program import Program, layers, program_guard
from gradgen.program.errors import ProgramError
from tests.backends.xla_harness import assert_same, need_jax
from tests.ops.kernel_cases_metrics import accuracy_ref, precision_recall_ref

BACKENDS = ("numpy", "xla")


def _data(classes: int, dtype: str, label_dtype: str, column: bool):
    x = layers.data("x", [-1, classes], dtype)
    return x, layers.data("y", [-1, 1] if column else [-1], label_dtype)


def _run_both(main, feed, fetch, startup=None, runs=1):
    """Each backend's fetched values of the last of ``runs`` runs (after ``startup``), or its ExecutionError."""
    need_jax()
    results = []
    for backend in BACKENDS:
        exe, scope = Executor(backend=backend), Scope()
        if startup is not None:
            exe.run(startup, scope=scope)
        try:
            for _ in range(runs):
                values = exe.run(main, feed=feed, fetch_list=fetch, scope=scope)
            results.append(values)
        except ExecutionError as e:
            results.append(e)
    return results


def _outputs(metric) -> list:
    """Every output var of the op that made ``metric``, in slot order."""
    block = metric.block
    op = next(op for op in block.ops if metric.name in op.output_arg_names)
    return [block.var(n) for names in op.outputs.values() for n in names]


def test_each_layer_is_one_op():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x, y = _data(4, "float32", "int64", True)
        p = layers.data("p", [-1, 2], "float32")
        layers.accuracy(x, y, k=2)
        layers.precision(x, y)
        layers.recall(x, y, average="macro")
        layers.auc(p, y)
    assert [op.type for op in main.global_block().ops] == ["accuracy", "precision_recall", "precision_recall", "auc"]
    assert [op.type for op in startup.global_block().ops] == ["fill_constant", "fill_constant"]  # the auc counters


CASES = [  # rows, classes, k, ties
    (17, 5, 1, False), (17, 5, 2, True), (9, 4, 4, True), (6, 3, 3, False), (1, 6, 2, True), (0, 4, 1, False),
    (11, 1, 1, False)]


@pytest.mark.parametrize("rows, classes, k, ties", CASES)
@pytest.mark.parametrize("dtype, label_dtype, column", [("float32", "int64", True), ("float64", "int32", False),
                                                        ("float32", "int32", False), ("float64", "int64", True)])
def test_accuracy_precision_and_recall_count_what_they_say_on_both_backends(rows, classes, k, ties, dtype,
                                                                            label_dtype, column):
    rng = np.random.default_rng(rows * 31 + classes * 7 + k)
    scores = (rng.integers(0, 3, (rows, classes)) if ties else rng.normal(size=(rows, classes)) * 40).astype(dtype)
    ids = rng.integers(0, classes, rows).astype(label_dtype)
    label = ids.reshape(-1, 1) if column else ids
    main = Program()
    with program_guard(main, Program()):
        x, y = _data(classes, dtype, label_dtype, column)
        pos_label = classes - 1
        metrics = [layers.accuracy(x, y, k=k), layers.precision(x, y, "binary", pos_label),
                   layers.recall(x, y, "binary", pos_label), layers.precision(x, y, "macro"),
                   layers.recall(x, y, "macro")]
    fetch = _outputs(metrics[0]) + metrics[1:]
    numpy_values, xla_values = _run_both(main, {"x": scores, "y": label}, fetch)
    assert_same(numpy_values, xla_values, [v.name for v in fetch], "xla vs numpy")
    want = accuracy_ref(scores, label, k)
    np.testing.assert_array_equal(numpy_values[1:3], [want["Correct"][0], want["Total"][0]])
    np.testing.assert_allclose(numpy_values[0], want["Accuracy"][0], rtol=1e-15)  # NaN when the batch is empty
    binary = precision_recall_ref(scores, label, "binary", pos_label)
    macro = precision_recall_ref(scores, label, "macro", 0)
    for got, want in zip(numpy_values[3:], [binary["Precision"], binary["Recall"], macro["Precision"],
                                            macro["Recall"]]):
        assert got.dtype == np.dtype(dtype) and got.shape == ()
        np.testing.assert_allclose(got, want[0], rtol=1e-6 if dtype == "float32" else 1e-15)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_an_empty_batch_is_nan_accuracy_zero_precision_and_recall_and_leaves_the_auc_counts():
    """Accuracy is the mean of no hits (NaN, as the layer built from ``mean`` gave), precision and recall divide by
    no predictions (0: zero_division=0), the AUC of no pairs is 0; Correct and Total are 0."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x, y = _data(3, "float32", "int64", True)
        p = layers.data("p", [-1], "float64")
        acc = layers.accuracy(x, y)
        total, batch, stats = layers.auc(p, y, num_thresholds=4)
        fetch = _outputs(acc) + [layers.precision(x, y, "macro"), layers.recall(x, y), total, batch] + stats
    feed = {"x": np.zeros((0, 3), np.float32), "y": np.zeros((0, 1), np.int64), "p": np.zeros(0)}
    numpy_values, xla_values = _run_both(main, feed, fetch, startup)
    assert_same(numpy_values, xla_values, [v.name for v in fetch], "xla vs numpy")
    assert np.isnan(numpy_values[0]) and numpy_values[0].dtype == np.float32
    assert numpy_values[1:3] == [0, 0]
    assert numpy_values[3:7] == [0.0, 0.0, 0.0, 0.0]
    assert not numpy_values[7].any() and not numpy_values[8].any()


@pytest.mark.parametrize("feed_classes, k, label, message", [
    (3, 4, 0, r"accuracy: k=4 is more than the 3 classes"),
    (3, 1, 3, r"accuracy: .*Label.* outside \[0, 3\)"),
    (3, 1, -1, r"accuracy: .*Label.* outside \[0, 3\)"),
])
def test_k_past_the_classes_met_at_run_time_and_labels_outside_them_are_errors(feed_classes, k, label, message):
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, -1], "float64")  # the class count is met at run time
        y = layers.data("y", [-1], "int64")
        acc = layers.accuracy(x, y, k=k)
    feed = {"x": np.zeros((2, feed_classes)), "y": np.array([0, label])}
    for got in _run_both(main, feed, [acc]):
        assert isinstance(got, ExecutionError) and re.search(message, str(got)), got


def test_k_past_a_known_class_count_is_refused_when_the_program_is_built():
    with program_guard(Program(), Program()):
        x, y = _data(3, "float32", "int64", True)
        with pytest.raises(ProgramError, match="k=4 must be between 0 and the size 3"):
            layers.accuracy(x, y, k=4)
        with pytest.raises(ProgramError, match="Label must be int32 or int64"):
            layers.accuracy(x, layers.data("f", [-1, 1], "float32"))
        with pytest.raises(ProgramError, match="X has 4 rows but Label has 5"):
            layers.accuracy(layers.data("x4", [4, 3], "float32"), layers.data("y5", [5], "int64"))


def test_a_nan_score_ranks_above_every_number_as_in_argmax_and_top_k():
    scores = np.array([[1.0, np.nan, 0.0], [np.nan, 2.0, np.nan], [0.5, 0.5, 0.1], [np.nan, np.nan, 3.0]])
    label = np.array([0, 1, 1, 2])
    main = Program()
    with program_guard(main, Program()):
        x, y = _data(3, "float64", "int64", False)
        metrics = [layers.accuracy(x, y, k=k) for k in (1, 2, 3)]
        _, ranked = layers.top_k(x, 3)
    numpy_values, xla_values = _run_both(main, {"x": scores, "y": label}, metrics)
    assert_same(numpy_values, xla_values, ["k=1", "k=2", "k=3"], "xla vs numpy")
    # the labels' places, NaN first and ties by index: second (after the NaN), third (after two NaNs), second
    # (tied with class 0), third (after two NaNs)
    np.testing.assert_array_equal(numpy_values, [0.0, 0.5, 1.0])
    (order,) = Executor().run(main, feed={"x": scores, "y": label}, fetch_list=[ranked])
    places = [list(row).index(c) for row, c in zip(order, label)]
    assert list(numpy_values) == [np.mean([p < k for p in places]) for k in (1, 2, 3)]


def _mann_whitney_auc(scores, labels) -> float:
    """U / (positives * negatives), U from the rank sum of the positives (average ranks at ties)."""
    scores, positive = np.asarray(scores, np.float64), np.asarray(labels) != 0
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if not n_pos or not n_neg:
        return 0.0
    u = rankdata(scores)[positive].sum() - n_pos * (n_pos + 1) / 2
    return u / (n_pos * n_neg)


@pytest.mark.parametrize("dtype, label_dtype, columns", [("float32", "int64", 2), ("float64", "int32", 0),
                                                         ("float32", "int32", 1)])
def test_auc_accumulated_over_runs_is_the_mann_whitney_statistic_of_every_score_seen(dtype, label_dtype, columns):
    """Scores on a grid of hundredths (many equal) in 1000 buckets: equal scores share a bucket and different ones
    do not, so the bucketed AUC is the exact one, ties counting half a pair."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        p = layers.data("p", {2: [-1, 2], 1: [-1, 1], 0: [-1]}[columns], dtype)
        y = layers.data("y", [-1, 1], label_dtype)
        total, batch, _ = layers.auc(p, y, num_thresholds=1000)
    rng = np.random.default_rng(columns)
    need_jax()
    exes = {b: (Executor(backend=b), Scope()) for b in BACKENDS}
    for exe, scope in exes.values():
        exe.run(startup, scope=scope)
    seen_p, seen_y = [], []
    for rows in (13, 0, 1, 25, 8):
        q = np.round(rng.uniform(size=rows) * 100) / 100 + 0.0005  # well inside its bucket in float32 too
        labels = rng.integers(0, 2, rows) * rng.choice([1, 7], rows)
        feed = {"p": {2: np.stack([1 - q, q], 1), 1: q[:, None], 0: q}[columns].astype(dtype),
                "y": labels[:, None].astype(label_dtype)}
        seen_p += list(q)
        seen_y += list(labels)
        got = {b: exe.run(main, feed=feed, fetch_list=[total, batch], scope=scope) for b, (exe, scope) in exes.items()}
        assert_same(got["numpy"], got["xla"], ["auc", "batch_auc"], f"{rows} rows")
        assert got["numpy"][0] == pytest.approx(_mann_whitney_auc(seen_p, seen_y), abs=1e-12)
        assert got["numpy"][1] == pytest.approx(_mann_whitney_auc(q, labels), abs=1e-12)


def test_a_nan_prediction_is_an_auc_error_on_both_backends():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        total, _, _ = layers.auc(layers.data("p", [-1], "float64"), layers.data("y", [-1], "int64"))
    feed = {"p": np.array([0.5, np.nan]), "y": np.array([1, 0])}
    for got in _run_both(main, feed, [total], startup):
        assert isinstance(got, ExecutionError) and "Predict holds NaN" in str(got), got


def _metric_op(block, op_type: str, inputs: dict, slots: tuple, attrs: dict):
    """Append a metric op whose outputs are NOT marked stop_gradient; returns its first output."""
    names = {s: [block.program.unique_name(f"{op_type}.{s.lower()}")] for s in slots}  # made by the op's types
    block.append_op(op_type, inputs, names, attrs)
    return block.var(names[slots[0]][0])


def test_no_gradient_and_no_tangent_flows_through_a_metric_op():
    """Metric outputs left differentiable by the user still pass nothing back: the ops are non-differentiable, so
    the gradient of scores + metrics is the scores' alone, and a metric has no tangent."""
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 3], "float64")
        y = layers.data("y", [-1], "int64")
        block = main.global_block()
        acc = _metric_op(block, "accuracy", {"X": [x], "Label": [y]}, ("Accuracy", "Correct", "Total"), {"k": 2})
        pr = _metric_op(block, "precision_recall", {"X": [x], "Label": [y]}, ("Precision", "Recall"),
                        {"average": "macro"})
        stats = [block.create_var(f"s{k}", [5], "float64", persistable=True) for k in range(2)]
        area = _metric_op(block, "auc", {"Predict": [layers.sigmoid(x[:, 0])], "Label": [y], "StatPos": [stats[0]],
                                         "StatNeg": [stats[1]]}, ("AUC", "BatchAUC", "StatPosOut", "StatNegOut"),
                          {"num_thresholds": 4})
        assert not any(v.stop_gradient for v in (acc, pr, area))
        loss = layers.reduce_sum(x) + acc + pr + area
        (dx,) = gradients([loss], [x])
        tangents = forward_gradients([acc, pr, area], [x])
    assert tangents == [None, None, None]
    made_for = {op.type for op in block.ops if op.role == "backward"}
    assert not made_for & {"accuracy", "precision_recall", "auc"}, made_for
    feed = {"x": np.arange(6.0).reshape(2, 3), "y": np.array([2, 0])}
    scope = Scope()
    for stat in stats:
        scope.set(stat.name, np.zeros(5))
    (got,) = Executor().run(main, feed=feed, fetch_list=[dx], scope=scope)
    np.testing.assert_array_equal(got, np.ones((2, 3)))
