"""The classification losses at the edges of their label domain: soft labels that do not sum to 1, a class axis
other than the last, labels equal to ``ignore_index``, and labels or ids out of range (a run-time error)."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import ExecutionError, Executor, Scope, gradients
from gradgen.program import Program, layers, program_guard
from gradgen.program.errors import ProgramError
from tests.cli.test_cli import gradgen

from .checking import check_op_gradients


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _log_softmax(z, axis):
    shifted = z - z.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def _run(build, feed, fetch_names=None):
    """Build ``build(**vars) -> [vars to fetch]`` on data vars shaped like ``feed``; run it once."""
    main = Program()
    with program_guard(main, Program()):
        vs = {n: layers.data(n, list(a.shape), str(a.dtype)) for n, a in feed.items()}
        fetch = build(**vs)
    return Executor(check_types=True).run(main, feed=feed, fetch_list=fetch, scope=Scope())


# -- soft labels ---------------------------------------------------------------------------------------------------

def test_soft_labels_that_do_not_sum_to_one_the_issue_example():
    z, q = np.array([[0.1, 0.5, -0.3]]), np.full((1, 3), 0.2)

    def build(z, q):
        return gradients(layers.reduce_sum(layers.softmax_with_cross_entropy(z, q, soft_label=True)), [z])

    (got,) = _run(build, {"z": z, "q": q})
    softmax = np.exp(_log_softmax(z, -1))
    np.testing.assert_allclose(got, softmax * q.sum() - q, rtol=1e-12)  # d/dz of -sum(q * log_softmax(z))
    np.testing.assert_allclose(got, [[-0.01025537, 0.08306573, -0.07281037]], atol=1e-8)


@pytest.mark.parametrize("shape, axis", [((3, 4), -1), ((3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), -1)], ids=str)
def test_soft_labels_of_any_sum_match_finite_differences(shape, axis):
    rng = np.random.default_rng(1)
    check_op_gradients(lambda z, q: layers.softmax_with_cross_entropy(z, q, soft_label=True, axis=axis),
                       {"z": _x(shape), "q": rng.uniform(0.0, 2.0, shape)})


# -- hard labels along another axis ----------------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [1, 2])
def test_hard_labels_along_axis_1_and_2_of_paddles_op_test_shape(axis):
    """Paddle's own op test: a [3, 5, 7, 11] input with the classes along axis 1 or 2."""
    shape = (3, 5, 7, 11)
    label_shape = tuple(1 if i == axis else d for i, d in enumerate(shape))
    labels = np.random.default_rng(axis).integers(0, shape[axis], label_shape)
    check_op_gradients(lambda z, label: layers.softmax_with_cross_entropy(z, label, axis=axis), {"z": _x(shape)},
                       extra_feed={"label": labels})


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("with_axis", [True, False], ids=["label_keeps_axis", "label_without_axis"])
def test_hard_labels_along_any_axis_first_and_second_order(axis, with_axis):
    shape = (2, 3, 4)
    kept = tuple(1 if i == axis else d for i, d in enumerate(shape))
    labels = np.random.default_rng(axis).integers(0, shape[axis], kept).astype(np.int32)
    if not with_axis:
        labels = labels.squeeze(axis)
    check_op_gradients(lambda z, label: layers.softmax_with_cross_entropy(z, label, axis=axis), {"z": _x(shape)},
                       extra_feed={"label": labels})


def test_hard_labels_along_axis_1_give_the_loss_of_a_hand_computation():
    z = _x((2, 3, 4))
    labels = np.array([[[0, 2, 1, 1]], [[2, 2, 0, 1]]])
    (loss,) = _run(lambda z, label: [layers.softmax_with_cross_entropy(z, label, axis=1)], {"z": z, "label": labels})
    np.testing.assert_allclose(loss, -np.take_along_axis(_log_softmax(z, 1), labels, axis=1), rtol=1e-12)


# -- ignore_index ------------------------------------------------------------------------------------------------------

LOSSES = {
    "softmax_with_cross_entropy": lambda z, label, **kw: layers.softmax_with_cross_entropy(z, label, **kw),
    "cross_entropy": lambda z, label, **kw: layers.cross_entropy(layers.softmax(z), label, **kw),
}


def _reference_rows(z, labels, ignore_index):
    """-log softmax(z)[label] per row, 0 where the label is ignore_index; and the mask of kept rows."""
    kept = labels != ignore_index
    picked = np.take_along_axis(_log_softmax(z, -1), np.where(kept, labels, 0), axis=-1)
    return np.where(kept, -picked, 0.0), kept


@pytest.mark.parametrize("loss", sorted(LOSSES))
@pytest.mark.parametrize("ignore_index", [-100, -1, 2])
def test_ignored_rows_get_zero_loss_and_zero_gradient(loss, ignore_index):
    z = _x((5, 4))
    labels = np.array([[0], [ignore_index], [3], [ignore_index], [2 if ignore_index != 2 else 1]])

    def build(z, label):
        rows = LOSSES[loss](z, label, ignore_index=ignore_index)
        return [rows] + gradients(layers.reduce_sum(rows), [z])

    rows, dz = _run(build, {"z": z, "label": labels})
    want, kept = _reference_rows(z, labels, ignore_index)
    np.testing.assert_allclose(rows, want, rtol=1e-12)
    softmax = np.exp(_log_softmax(z, -1))
    one_hot = np.eye(4)[np.where(kept, labels, 0)[:, 0]]
    np.testing.assert_allclose(dz, (softmax - one_hot) * kept, rtol=1e-10, atol=1e-14)
    assert not dz[~kept[:, 0]].any()


@pytest.mark.parametrize("loss", sorted(LOSSES))
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_the_mean_divides_by_the_rows_kept(loss, reduction):
    z = _x((6, 3), seed=2)
    labels = np.array([[0], [-100], [2], [1], [-100], [1]])
    (value,) = _run(lambda z, label: [LOSSES[loss](z, label, reduction=reduction)], {"z": z, "label": labels})
    rows, kept = _reference_rows(z, labels, -100)
    np.testing.assert_allclose(value, rows.sum() / (kept.sum() if reduction == "mean" else 1), rtol=1e-12)


@pytest.mark.parametrize("loss", sorted(LOSSES))
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_ignored_labels_match_finite_differences_first_and_second_order(loss, reduction):
    labels = np.array([[1], [-100], [0], [2]])
    check_op_gradients(lambda z, label: LOSSES[loss](z, label, reduction=reduction), {"z": _x((4, 3), seed=3)},
                       extra_feed={"label": labels})


def test_ignore_index_applies_along_another_axis():
    labels = np.array([[[0, -100, 2]], [[-100, -100, 1]]])
    check_op_gradients(lambda z, label: layers.softmax_with_cross_entropy(z, label, axis=1, reduction="mean"),
                       {"z": _x((2, 4, 3), seed=4)}, extra_feed={"label": labels})


@pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning")
def test_every_row_ignored_gives_a_nan_mean_as_paddle_and_pytorch_do():
    (value,) = _run(lambda z, label: [layers.softmax_with_cross_entropy(z, label, reduction="mean")],
                    {"z": _x((2, 3)), "label": np.array([[-100], [-100]])})
    assert np.isnan(value)


def test_zero_rows_give_an_empty_loss_and_an_empty_gradient():
    def build(z, label):
        rows = layers.softmax_with_cross_entropy(z, label)
        return [rows] + gradients(layers.reduce_sum(rows), [z])

    rows, dz = _run(build, {"z": np.zeros((0, 3)), "label": np.zeros((0, 1), np.int64)})
    assert rows.shape == (0, 1) and dz.shape == (0, 3)


def test_an_unknown_reduction_is_a_build_error():
    with program_guard(Program(), Program()):
        z, label = layers.data("z", [2, 3], "float64"), layers.data("label", [2, 1], "int64")
        for loss in LOSSES.values():
            with pytest.raises(ProgramError, match="reduction must be one of"):
                loss(z, label, reduction="average")
        assert [op.type for op in z.block.ops] == ["softmax"]  # only cross_entropy's input was appended


# -- out of range: an error naming the op and the value ----------------------------------------------------------------

@pytest.mark.parametrize("loss", sorted(LOSSES))
@pytest.mark.parametrize("bad", [-1, 4, -100])
def test_a_label_out_of_range_is_a_run_time_error_naming_the_op_and_the_value(loss, bad):
    labels = np.array([[0], [bad], [3]])
    kw = {"ignore_index": -7} if bad == -100 else {}  # -100 is ignored by default, so not out of range then
    with pytest.raises(ExecutionError, match=rf"\({loss}\).*label {bad} at index \[1, 0\] is outside \[0, 4\)"):
        _run(lambda z, label: [LOSSES[loss](z, label, **kw)], {"z": _x((3, 4)), "label": labels})


def test_labels_without_the_class_axis_are_checked_too():
    with pytest.raises(ExecutionError, match=r"label 5 at index \[0, 1\] is outside \[0, 3\)"):
        _run(lambda z, label: [layers.softmax_with_cross_entropy(z, label, axis=1)],
             {"z": _x((2, 3, 2)), "label": np.array([[0, 5], [1, 2]], np.int32)})


@pytest.mark.parametrize("bad", [-1, 10])
def test_an_embedding_id_out_of_range_is_a_run_time_error_naming_the_op_and_the_id(bad):
    main, startup = Program(), Program()
    with program_guard(main, startup):
        ids = layers.data("ids", [3], "int64")
        out = layers.embedding(ids, [10, 2], "float64")
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    (ok,) = exe.run(main, feed={"ids": np.array([0, 9, 3])}, fetch_list=[out], scope=scope)
    assert ok.shape == (3, 2)
    with pytest.raises(ExecutionError, match=rf"\(lookup_table\).*id {bad} at index \[2\] is outside \[0, 10\)"):
        exe.run(main, feed={"ids": np.array([0, 9, bad])}, fetch_list=[out], scope=scope)


def test_gradgen_check_grad_agrees_on_soft_labels_that_do_not_sum_to_one(tmp_path):
    """The issue's report: ``gradgen check-grad`` said MISMATCH for z = [[.1, .5, -.3]], q = [[.2, .2, .2]]."""
    main = Program()
    with program_guard(main, Program()):
        z, q = layers.data("z", [1, 3], "float64"), layers.data("q", [1, 3], "float64")
        layers.reduce_sum(layers.softmax_with_cross_entropy(z, q, soft_label=True), name="loss")
    main.save(tmp_path / "p.json")
    np.save(tmp_path / "z.npy", np.array([[0.1, 0.5, -0.3]]))
    np.save(tmp_path / "q.npy", np.full((1, 3), 0.2))
    result = gradgen("check-grad", tmp_path / "p.json", "--loss", "loss", "--feed", f"z={tmp_path / 'z.npy'}",
                     "--feed", f"q={tmp_path / 'q.npy'}")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith(("z ", "q "))]
    assert len(lines) == 2 and all(line.endswith("ok") for line in lines), result.stdout


@pytest.mark.parametrize("case", ["soft", "hard", "cross_entropy_soft", "sigmoid"])
def test_labels_whose_minus_one_dims_differ_at_run_time_are_an_error_not_a_broadcast(case):
    """Logits [-1, 3] fed (1, 3) with labels [-1, ...] fed 4 rows: numpy would broadcast into 4 losses."""
    def build(z, label):
        if case == "soft":
            return [layers.softmax_with_cross_entropy(z, label, soft_label=True)]
        if case == "hard":
            return [layers.softmax_with_cross_entropy(z, label)]
        if case == "cross_entropy_soft":
            return [layers.cross_entropy(layers.softmax(z), label, soft_label=True)]
        return [layers.sigmoid_cross_entropy_with_logits(z, label)]

    label = np.zeros((4, 1), np.int64) if case == "hard" else np.full((4, 3), 0.25)
    main = Program()
    with program_guard(main, Program()):
        z = layers.data("z", [-1, 3], "float64")
        fetch = build(z, layers.data("label", [-1] + list(label.shape[1:]), str(label.dtype)))
    with pytest.raises(ExecutionError, match=r"Label has run-time shape \[4, (1|3)\], but (Logits|X) \[1, 3\]"):
        Executor().run(main, feed={"z": _x((1, 3)), "label": label}, fetch_list=fetch, scope=Scope())


@pytest.mark.parametrize("ignore_index", [-100, 1])
def test_float32_logits_and_int32_labels_keep_their_types_through_the_reductions(ignore_index):
    def build(z, label):
        mean = layers.softmax_with_cross_entropy(z, label, ignore_index=ignore_index, reduction="mean")
        total = layers.cross_entropy(layers.softmax(z), label, ignore_index=ignore_index, reduction="sum")
        return [mean, total] + gradients(mean + total, [z])

    z = _x((2, 3)).astype(np.float32)
    mean, total, dz = _run(build, {"z": z, "label": np.array([0, 1], np.int32)})  # check_types is on
    assert (mean.dtype, total.dtype, dz.dtype, dz.shape) == (np.float32, np.float32, np.float32, (2, 3))
    rows, kept = _reference_rows(z.astype(np.float64), np.array([[0], [1]]), ignore_index)
    np.testing.assert_allclose(mean, rows.sum() / kept.sum(), rtol=1e-6)
    np.testing.assert_allclose(total, rows.sum(), rtol=1e-6)
