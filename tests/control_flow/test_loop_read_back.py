"""The numpy backend's gradient loops read their forward loop's body values back instead of recomputing them.

``shared/loop_read_back`` says which reverse-body ops may read back; ``kernels/control_flow`` links the two
loops' kernels. The answers must be exactly those of the recompute (``PlanOptions(read_back=False)``), the
recompute must be gone, and a gradient loop whose counter or outer arrays are not the forward run's own must
recompute.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, gradients
from gradgen.framework.backend.numpy.kernels import KERNELS
from gradgen.framework.backend.numpy.kernels.control_flow import LoopStashes
from gradgen.framework.backend.numpy.plan_data import PlanOptions
from gradgen.framework.backend.shared.loop_read_back import forward_read_back, replays_of
from gradgen.program import Program, layers, program_guard

from .rnn import build, feed_for

PLAIN = PlanOptions()  # every matmul runs through the kernel table, so the spies see each one


def _counting(table: dict, counts: dict) -> dict:
    """``table`` with its matmul kernel counting its calls into ``counts["matmul"]``."""
    def matmul(op):
        fn = table["matmul"](op)

        def run(*values):
            counts["matmul"] = counts.get("matmul", 0) + 1
            return fn(*values)
        return run
    return {**table, "matmul": matmul}


def _run(main, fetch, feed, options: PlanOptions) -> list:
    names = {v.name for v in main.global_block().vars.values()}
    return Executor(options=options).run(main, feed={k: v for k, v in feed.items() if k in names},
                                         fetch_list=fetch, scope=Scope())


def _rnn_runs(options: PlanOptions, steps: int = 6, seed: int = 4) -> tuple[list, int]:
    counts: dict = {}
    main, loss, grads = build()
    got = _run(main, [loss, *grads], feed_for(steps, seed=seed), replace(options, kernels=_counting(
        dict(options.kernels), counts)))
    return got, counts.get("matmul", 0)


def test_the_analysis_finds_the_rnn_recompute_and_what_the_gradient_loop_needs():
    main, _, _ = build()
    forward, reverse = [op for op in main.global_block().ops if op.type == "while"]
    ((found, plan),) = replays_of(forward)
    assert found is reverse and forward_read_back(reverse) == (forward, plan)
    body = main.block(reverse.attr("body_block"))
    assert sorted(body.ops[j].type for _, j in plan.pairs) == ["elementwise_add", "gather", "matmul", "tanh"]
    assert [body.ops[j].type for j in plan.dead] == ["gather"]  # the counter's History row: only the gather read it
    assert set(plan.needed) < set(plan.names)  # the matmul's and add's values: nothing but the read-back ops reads them
    assert all(body.ops[j].output_arg_names[0] not in plan.needed for _, j in plan.pairs
               if body.ops[j].type in ("matmul", "elementwise_add"))


@pytest.mark.parametrize("steps", [0, 1, 6])
def test_reading_back_gives_exactly_the_recompute_s_answers_without_its_products(steps):
    read, read_products = _rnn_runs(PLAIN, steps)
    recomputed, recomputed_products = _rnn_runs(replace(PLAIN, read_back=False), steps)
    for a, b in zip(read, recomputed):
        np.testing.assert_array_equal(a, b)
    assert recomputed_products - read_products == steps  # the forward body's product, once a reverse iteration


def test_second_order_through_a_loop_reads_back_at_both_levels_with_the_same_answers():
    """A Hessian-vector product: the gradient loop is itself a forward loop of the second gradient loop."""
    rng = np.random.default_rng(2)
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3], "float64")
        w = layers.data("w", [3, 3], "float64")
        v = layers.data("v", [3, 3], "float64")
        limit, one = layers.fill_constant([], "int64", 4), layers.fill_constant([], "int64", 1)
        _, h = layers.while_loop(lambda t, h: layers.less_than(t, limit),
                                 lambda t, h: [layers.add(t, one), layers.sin(layers.matmul(h, w))],
                                 [layers.fill_constant([], "int64", 0), x])
        loss = layers.reduce_sum(layers.square(h))
        (gw,) = gradients([loss], [w])
        (hv,) = gradients([layers.reduce_sum(layers.multiply(gw, v))], [w])
    feed = {"x": rng.standard_normal((2, 3)), "w": 0.5 * rng.standard_normal((3, 3)), "v": rng.standard_normal((3, 3))}
    loops = [op for op in main.global_block().ops if op.type == "while"]
    assert sum(forward_read_back(op) is not None for op in loops) >= 2
    counts: dict = {}
    got = _run(main, [loss, gw, hv], feed, replace(PLAIN, kernels=_counting(KERNELS, counts)))
    want = _run(main, [loss, gw, hv], feed, replace(PLAIN, read_back=False))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
    assert counts["matmul"] > 0


def _spied(role: str, change) -> dict:
    """The kernel table with the ``while`` of ``role`` passing its values through ``change(values) -> values``
    (before its kernel for a gradient loop's inputs, after it for a forward loop's outputs)."""
    def while_(op, blocks, *, dropped=frozenset(), stash=LoopStashes()):
        kernel = KERNELS["while"](op, blocks, dropped=dropped, stash=stash)
        if op.role != role:
            return kernel
        if role == "forward":
            return lambda *values: change(kernel(*values))
        return lambda *values: kernel(*change(values))
    return {**KERNELS, "while": while_}


@pytest.mark.parametrize("role, change", [
    ("forward", lambda outs: (*outs[:-1], np.int64(int(outs[-1])))),  # Steps: equal, but not the forward run's own
    ("backward", lambda ins: (*ins[:-1], ins[-1].copy())),  # w: equal, but not the array the forward loop read
], ids=["another counter", "another outer array"])
def test_a_gradient_loop_not_given_the_forward_run_s_own_values_recomputes(role, change):
    main, loss, grads = build()
    feed = feed_for(5, seed=1)
    counts: dict = {}
    got = _run(main, [loss, *grads], feed, replace(PLAIN, kernels=_counting(_spied(role, change), counts)))
    want, recomputed_products = _rnn_runs(replace(PLAIN, read_back=False), 5, seed=1)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    assert counts["matmul"] == recomputed_products


def test_the_stash_is_let_go_once_its_gradient_loop_has_read_it():
    seen: list = []

    def while_(op, blocks, *, dropped=frozenset(), stash=LoopStashes()):
        seen.append(stash)
        return KERNELS["while"](op, blocks, dropped=dropped, stash=stash)

    main, loss, grads = build()
    _run(main, [loss, *grads], feed_for(5), replace(PLAIN, kernels={**KERNELS, "while": while_}))
    (forward,) = [s for s in seen if s.writes is not None]
    assert forward.writes.readers == 1 and forward.writes.latest is None
    assert any(s.reads is not None and s.reads[0] is forward.writes for s in seen)
