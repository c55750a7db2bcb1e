"""``fluid.layers.While``: Paddle's in-place loop body, rebuilt as a ``while_loop``: values, trip counts fed at
run time, gradients through it (central differences, float64), and the errors."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, fluid, gradients
from gradgen.program import Program, program_guard
from gradgen.program.errors import ProgramError


def test_paddles_while_example_sums_one_to_ten():
    """The loop Paddle's While docs show, as a script writes it."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        i = fluid.layers.fill_constant(shape=[1], dtype="int64", value=0)
        loop_len = fluid.layers.fill_constant(shape=[1], dtype="int64", value=10)
        total = fluid.layers.fill_constant(shape=[1], dtype="int64", value=0)
        cond = fluid.layers.less_than(x=i, y=loop_len)
        while_op = fluid.layers.While(cond=cond)
        with while_op.block():
            fluid.layers.increment(x=i, value=1, in_place=True)
            fluid.layers.assign(fluid.layers.elementwise_add(total, i), total)
            fluid.layers.less_than(x=i, y=loop_len, cond=cond)
    got_i, got_total, got_cond = Executor().run(main, fetch_list=[i, total, cond], scope=Scope())
    assert got_i.tolist() == [10] and got_total.tolist() == [55] and got_cond.tolist() == [False]


def _rnn(dtype="float64"):
    """h <- tanh(h @ w) while i < n, n fed; returns the program and its loss, i, and the grads of h0 and w."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        n = fluid.layers.data("n", [1], "int64", append_batch_size=False)
        h0 = fluid.layers.data("h0", [2, 3], dtype, append_batch_size=False)
        w = fluid.layers.data("w", [3, 3], dtype, append_batch_size=False)
        h0.stop_gradient = w.stop_gradient = False
        i = fluid.layers.fill_constant([1], "int64", 0)
        h = fluid.layers.assign(h0)
        cond = fluid.layers.less_than(i, n)
        loop = fluid.layers.While(cond)
        with loop.block():
            fluid.layers.assign(fluid.layers.tanh(fluid.layers.matmul(h, w)), h)
            fluid.layers.increment(i)
            fluid.layers.less_than(i, n, cond=cond)
        loss = fluid.layers.reduce_sum(fluid.layers.square(h))
        grads = gradients(loss, [h0, w])
    return main, loss, i, grads


def _numpy_loss(h0, w, steps):
    h = h0
    for _ in range(steps):
        h = np.tanh(h @ w)
    return np.sum(h * h)


@pytest.mark.parametrize("steps", [0, 1, 4])
def test_an_rnn_loop_runs_as_many_steps_as_fed_and_its_gradients_match_central_differences(steps):
    main, loss, i, (g_h0, g_w) = _rnn()
    rng = np.random.default_rng(steps)
    h0, w = rng.standard_normal((2, 3)), 0.6 * rng.standard_normal((3, 3))
    got = Executor().run(main, feed={"n": np.array([steps]), "h0": h0, "w": w}, fetch_list=[loss, i, g_h0, g_w],
                         scope=Scope())
    assert got[1].tolist() == [steps]
    np.testing.assert_allclose(got[0], _numpy_loss(h0, w, steps), rtol=1e-13)
    for value, grad, which in ((h0, got[2], 0), (w, got[3], 1)):
        numeric = np.zeros_like(value)
        for idx in np.ndindex(value.shape):
            bumped = [value.copy(), value.copy()]
            bumped[0][idx] += 1e-6
            bumped[1][idx] -= 1e-6
            args = [(b, w) if which == 0 else (h0, b) for b in bumped]
            numeric[idx] = (_numpy_loss(*args[0], steps) - _numpy_loss(*args[1], steps)) / 2e-6
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-9)


def test_float32_loops_stay_float32():
    main, loss, _, (g_h0, g_w) = _rnn("float32")
    rng = np.random.default_rng(0)
    feed = {"n": np.array([3]), "h0": rng.standard_normal((2, 3)).astype("float32"),
            "w": rng.standard_normal((3, 3)).astype("float32")}
    got = Executor().run(main, feed=feed, fetch_list=[loss, g_h0, g_w], scope=Scope())
    assert [v.dtype for v in got] == [np.float32] * 3


def test_a_body_that_never_updates_its_cond_is_an_error():
    with program_guard(Program(), Program()):
        i = fluid.layers.fill_constant([1], "int64", 0)
        cond = fluid.layers.less_than(i, fluid.layers.fill_constant([1], "int64", 3))
        loop = fluid.layers.While(cond)
        with pytest.raises(ProgramError, match="never writes its cond"):
            with loop.block():
                fluid.layers.increment(i)


def test_while_wants_a_bool_scalar_cond():
    with program_guard(Program(), Program()):
        with pytest.raises(ProgramError, match="bool scalar"):
            fluid.layers.While(fluid.layers.fill_constant([1], "int64", 0))
