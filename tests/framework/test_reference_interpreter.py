"""The numpy backend is the reference interpreter: one plain kernel per op, in block order, no buffer another op
owns. Programs whose kernels return views (a 3-D product's reshaped 2-D result, transposes, reshapes, slices),
followed by ops of the same declared shape, computed exactly as numpy computes them.

The first case is issue 31's: under the old buffer slots, a transpose viewed a product's array that the next
op of the same declared shape overwrote (errors as large as the outputs).
"""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, append_backward, optimizer
from gradgen.program import Program, layers as L, program_guard


def _run(main, feed, fetch):
    return Executor(backend="numpy").run(main, feed=feed, fetch_list=fetch, scope=Scope())


def test_the_issue_31_program_is_exact():
    main = Program()
    with program_guard(main, Program()):
        x = L.data("x", [-1, 3, 2], "float64")
        w = L.data("w", [2, 2], "float64")
        t = L.transpose(L.matmul(x, w), perm=[0, 2, 1])
        out = L.matmul(t, x * x)
    rng = np.random.default_rng(0)
    X, W = rng.standard_normal((2, 3, 2)), rng.standard_normal((2, 2))
    (got,) = _run(main, {"x": X, "w": W}, [out])
    np.testing.assert_array_equal(got, (X @ W).transpose(0, 2, 1) @ (X * X))


@pytest.mark.parametrize("batch", [0, 1, 3])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_views_of_products_followed_by_ops_of_the_same_shape(batch, dtype):
    """q/k/v projections of a 4-D input, reshaped, transposed and sliced, then several ops of one declared shape
    (the pattern of LLaMA-, T5- and Whisper-style attention), every intermediate fetched and checked."""
    main = Program()
    with program_guard(main, Program()):
        x = L.data("x", [-1, 2, 4, 6], dtype)
        wq, wk = L.data("wq", [6, 6], dtype), L.data("wk", [6, 6], dtype)
        q = L.reshape(L.matmul(x, wq), [-1, 2, 4, 3, 2])
        k = L.transpose(L.matmul(x, wk), perm=[0, 1, 3, 2])
        scores = L.matmul(L.reshape(q, [-1, 2, 4, 6]), k)
        a = L.tanh(scores)
        b = L.exp(L.scale(scores, 0.1))
        first = L.slice(a, axes=[2], starts=[0], ends=[2])
        mix = a * b + L.transpose(scores, perm=[0, 1, 3, 2])
    rng = np.random.default_rng(batch)
    X = rng.standard_normal((batch, 2, 4, 6)).astype(dtype)
    Wq, Wk = rng.standard_normal((6, 6)).astype(dtype), rng.standard_normal((6, 6)).astype(dtype)
    got = _run(main, {"x": X, "wq": Wq, "wk": Wk}, [q, k, scores, a, b, first, mix])
    q_ = (X @ Wq).reshape(batch, 2, 4, 3, 2)
    k_ = (X @ Wk).transpose(0, 1, 3, 2)
    s_ = q_.reshape(batch, 2, 4, 6) @ k_
    want = [q_, k_, s_, np.tanh(s_), np.exp(s_ * 0.1), np.tanh(s_)[:, :, 0:2], np.tanh(s_) * np.exp(s_ * 0.1)
            + s_.transpose(0, 1, 3, 2)]
    tol = 1e-12 if dtype == "float64" else 1e-5
    for g, w in zip(got, want):
        assert g.dtype == np.dtype(dtype) and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def test_a_training_step_on_views_matches_plain_numpy_and_keeps_its_answers_over_runs():
    """An fc on a sequence (a folded 3-D product whose result is a reshaped view) trained with SGD: the gradient
    and update are numpy's own formulas, and a second executor run on the same scope gives the same answers as
    computing the second step by hand (nothing carried over between runs but the scope)."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = L.data("x", [-1, 5, 4], "float64")
        w = L.create_parameter([4, 3], "float64", name="w")
        h = L.transpose(L.matmul(x, w), perm=[0, 2, 1])
        loss = L.reduce_sum(L.square(h))
        optimizer.SGD(0.01).minimize(loss)
    rng = np.random.default_rng(4)
    X, W = rng.standard_normal((2, 5, 4)), rng.standard_normal((4, 3))
    exe, scope = Executor(backend="numpy"), Scope()
    exe.run(startup, scope=scope)
    scope.set("w", W.copy())
    for _ in range(2):
        (got,) = exe.run(main, feed={"x": X}, fetch_list=[loss], scope=scope)
        h_ = X @ W
        assert got.item() == pytest.approx(np.sum(h_ ** 2), rel=1e-12)
        W = W - 0.01 * np.einsum("bsi,bsj->ij", X, 2 * h_)
        np.testing.assert_allclose(scope["w"], W, rtol=1e-12)


def test_the_plan_runs_each_op_once_in_block_order_with_its_own_kernel():
    from gradgen.framework.backend.numpy.kernels import KERNELS

    main = Program()
    with program_guard(main, Program()):
        x = L.data("x", [-1, 4], "float64")
        w = L.create_parameter([4, 4], "float64", name="w")
        loss = L.reduce_mean(L.relu(x @ w))
        ((_, w_grad),) = append_backward(loss)
    plan = Executor(backend="numpy", check_types=False).plan_for(main, ["x"], [loss.name, w_grad.name])
    block = main.global_block()
    assert [s.index for s in plan.steps] == list(range(len(block.ops)))
    for step in plan.steps:  # no wrapper: the very function the op's factory builds
        op = block.ops[step.index]
        assert type(step.fn) is type(KERNELS[op.type](op))
