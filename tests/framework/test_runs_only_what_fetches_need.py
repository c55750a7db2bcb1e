"""A run runs the ops its fetches and the program's persistable updates need, and no more (TF1's
``Session.run``): an evaluation clone runs with only its inputs fed, on every engine."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, FeedError, Scope, optimizer
from gradgen.framework.backend.shared.signature import unneeded_ops
from gradgen.program import Program, layers, program_guard
from tests.backends.xla_harness import need_jax

ENGINES = ["numpy", "xla"]


def _classifier():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 3], "float64")
        label = layers.data("label", [-1, 1], "float64")
        logits = layers.fc(x, 1, name="logits")
        loss = layers.reduce_mean(layers.sigmoid_cross_entropy_with_logits(logits, label), name="loss")
        optimizer.SGD(learning_rate=0.1).minimize(loss)
    return main, startup, logits, loss


def _engine(backend: str) -> Executor:
    if backend == "xla":
        need_jax()
    return Executor(backend=backend)


@pytest.mark.parametrize("backend", ENGINES)
def test_an_eval_clone_runs_with_only_its_inputs_fed(backend):
    main, startup, logits, _ = _classifier()
    test_program = main.clone(for_test=True)
    exe, scope = _engine(backend), Scope()
    exe.run(startup, scope=scope)
    xs = np.arange(6.0).reshape(2, 3)
    (got,) = exe.run(test_program, feed={"x": xs}, fetch_list=[logits], scope=scope)
    want = xs @ scope["logits.w"] + scope["logits.b"]
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("backend", ENGINES)
def test_a_training_run_still_updates_the_parameters_when_only_the_logits_are_fetched(backend):
    """The updates are persistable writes: they run, and the label they need must be fed."""
    main, startup, logits, _ = _classifier()
    exe, scope = _engine(backend), Scope()
    exe.run(startup, scope=scope)
    before = np.array(scope["logits.w"])
    with pytest.raises(FeedError, match="label"):
        exe.run(main, feed={"x": np.ones((2, 3))}, fetch_list=[logits], scope=scope)
    np.testing.assert_array_equal(scope["logits.w"], before)  # the failed run left the scope as it was
    exe.run(main, feed={"x": np.ones((2, 3)), "label": np.ones((2, 1))}, fetch_list=[logits], scope=scope)
    assert not np.array_equal(scope["logits.w"], before)


def test_the_left_out_ops_are_those_no_fetch_and_no_update_reads():
    main, _, logits, loss = _classifier()
    block = main.global_block()
    test_block = main.clone(for_test=True).global_block()
    kept = [op.type for i, op in enumerate(test_block.ops) if i not in unneeded_ops(test_block, [logits.name])]
    assert "sigmoid_cross_entropy_with_logits" not in kept and "matmul" in kept
    assert unneeded_ops(block, [loss.name]) == frozenset()  # training: every op feeds the loss or an update


@pytest.mark.parametrize("backend", ENGINES)
def test_an_unfetched_branch_that_would_fail_does_not_run(backend):
    """A log of a negative number nobody fetches: the numpy engine's NaN check never sees it."""
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2], "float64")
        kept = layers.scale(x, 2.0)
        layers.log(x)
    exe = Executor(check_nan_inf=True) if backend == "numpy" else _engine(backend)
    (got,) = exe.run(main, feed={"x": np.array([-1.0, 2.0])}, fetch_list=[kept], scope=Scope())
    np.testing.assert_array_equal(got, [-2.0, 4.0])


def test_prune_takes_variables_as_executor_run_does():
    from gradgen.framework.passes.prune import prune

    main, _, logits, _ = _classifier()
    x = main.global_block().var("x")
    by_variable = prune(main, [logits], feeds=[x], for_test=True)
    by_name = prune(main, [logits.name], feeds=["x"], for_test=True)
    assert [op.type for op in by_variable.global_block().ops] == [op.type for op in by_name.global_block().ops]
    assert prune(main, logits).global_block().ops  # one Variable alone, too
