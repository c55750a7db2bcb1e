"""Feeding a var that an op makes overrides it (TF1's Session.run), the same on every engine; where overriding
would be ambiguous, the feed is refused with a FeedError naming the var and the ops (shared/signature)."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, FeedError, Scope, optimizer
from gradgen.program import Program, layers, program_guard
from tests.backends.xla_harness import need_jax

BACKENDS = ["numpy", "xla", "auto"]


def _executor(backend: str) -> Executor:
    if backend != "numpy":
        need_jax()
    return Executor(backend=backend)


def _regression():
    """``h = x @ w``, loss ``mean((h - y)^2)``, one SGD step of rate 0.5."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 3], "float64")
        y = layers.data("y", [-1, 1], "float64")
        w = layers.create_parameter([3, 1], "float64", name="w")
        h = layers.matmul(x, w)
        loss = layers.reduce_mean(layers.square(h - y))
        optimizer.SGD(0.5).minimize(loss)
    return main, startup, h, loss


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_fed_intermediate_replaces_what_its_op_makes_downstream_and_in_the_gradient(backend):
    main, startup, h, loss = _regression()
    exe, scope = _executor(backend), Scope()
    exe.run(startup, scope=scope)
    w0 = np.array([[0.5], [-1.0], [2.0]])
    scope.set("w", w0)
    x = np.arange(12.0).reshape(4, 3)
    y = np.array([[1.0], [0.0], [-1.0], [2.0]])
    fed_h = np.array([[3.0], [-2.0], [0.5], [1.0]])
    for _ in range(11 if backend == "auto" else 1):  # auto: through its trial, onto both engines
        scope.set("w", w0)
        got_loss, got_h = exe.run(main, feed={"x": x, "y": y, h.name: fed_h}, fetch_list=[loss, h], scope=scope)
        np.testing.assert_array_equal(got_h, fed_h)
        np.testing.assert_allclose(got_loss, np.mean((fed_h - y) ** 2), rtol=1e-15)
        # the gradient flows back from the fed value: dloss/dw = x^T (2 (h - y) / n)
        np.testing.assert_allclose(scope["w"], w0 - 0.5 * x.T @ (2 * (fed_h - y) / 4), rtol=1e-14)
    assert not np.allclose(x @ w0, fed_h)  # (the op's own value would have given another loss)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_op_a_feed_overrides_does_not_run_so_its_inputs_need_not_be_fed(backend):
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 2], "float64")
        h = layers.exp(x)
        out = layers.reduce_sum(layers.relu(h))
    exe = _executor(backend)
    for _ in range(11 if backend == "auto" else 1):
        (got,) = exe.run(main, feed={h.name: np.array([[1.0, -2.0], [3.0, -4.0]])}, fetch_list=[out],
                         scope=Scope())
        assert got == 4.0


@pytest.mark.parametrize("backend", ["numpy", "xla"])
def test_a_var_two_ops_write_is_refused_naming_both(backend):
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2], "float64")
        h = layers.exp(x)
        layers.assign(layers.tanh(x), output=h)
        out = layers.reduce_sum(h)
    with pytest.raises(FeedError, match=rf"feed '{h.name}': 2 ops write it \(block 0, op #0 \(exp\).*; "
                                        r"block 0, op #2 \(assign\)"):
        _executor(backend).run(main, feed={"x": np.ones(2), h.name: np.ones(2)}, fetch_list=[out], scope=Scope())


@pytest.mark.parametrize("backend", ["numpy", "xla"])
def test_a_persistable_made_before_it_is_read_is_refused(backend):
    """Feeding a parameter to its startup program: the feed would be the value the run starts from, never read."""
    main, startup, h, loss = _regression()
    with pytest.raises(FeedError, match=r"feed 'w': persistable w.* is made by block 0, op #\d+ \(\w+\).*"
                                        r"scope\.set it"):
        _executor(backend).run(startup, feed={"w": np.ones((3, 1))}, scope=Scope())


@pytest.mark.parametrize("backend", ["numpy", "xla"])
def test_an_op_whose_other_output_the_run_needs_is_refused(backend):
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [4], "float64")
        a, b = layers.split(x, 2)
        out = layers.reduce_sum(a) + layers.reduce_sum(b)
    exe = _executor(backend)
    with pytest.raises(FeedError, match=rf"feed '{a.name}' overrides an output of block 0, op #0 \(split\).*"
                                        rf"also needs its output {b.name}"):
        exe.run(main, feed={"x": np.ones(4), a.name: np.ones(2)}, fetch_list=[out], scope=Scope())
    both = {a.name: np.ones(2), b.name: np.full(2, 2.0)}  # every needed output fed: the op is left out
    assert exe.run(main, feed=both, fetch_list=[out], scope=Scope())[0] == 6.0


@pytest.mark.parametrize("backend", ["numpy", "xla"])
def test_a_var_an_op_reads_before_any_op_writes_it_is_fed_its_starting_value(backend):
    """A fed persistable an optimizer updates: the run starts from the feed, the update runs, nothing is committed
    (design_docs/executor.md, 'Feeding a persistable var')."""
    main, startup, h, loss = _regression()
    exe, scope = _executor(backend), Scope()
    exe.run(startup, scope=scope)
    before = scope["w"].copy()
    x, y, w = np.ones((2, 3)), np.zeros((2, 1)), np.full((3, 1), 2.0)
    (got_w,) = exe.run(main, feed={"x": x, "y": y, "w": w}, fetch_list=["w"], scope=scope)
    np.testing.assert_allclose(got_w, w - 0.5 * x.T @ (2 * (x @ w - y) / 2))
    np.testing.assert_array_equal(scope["w"], before)


def test_a_var_an_op_of_a_sub_block_writes_is_refused():
    """The builder refuses such a program (``subblocks.check_writes_local``); one edited by hand is refused here."""
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2], "float64")
        h = layers.exp(x)
        taken = layers.cond(layers.reduce_sum(x) > 0.0, lambda: layers.reduce_sum(x), lambda: layers.reduce_sum(x))
        out = layers.reduce_sum(h) + taken
    main.block(1).append_op("assign", inputs={"X": [x.name]}, outputs={"Out": [h.name]})
    with pytest.raises(FeedError, match=rf"feed '{h.name}': block 1, op #\d+ \(assign\).* writes it inside a "
                                        "sub-block"):
        Executor().run(main, feed={"x": np.ones(2), h.name: np.ones(2)}, fetch_list=[out], scope=Scope())
