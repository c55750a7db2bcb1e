"""Forward mode through cond (the tangent branch follows the predicate) and while (tangents carried through the
iterations), checked against reverse mode, finite differences and the unrolled loop."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, forward_gradients, gradients
from gradgen.program import Program, layers, program_guard
from tests.control_flow.rnn import B, H, build, feed_for, run

from .helpers import dot_product_sides


def _branches(x, y, p):
    return layers.cond(p, lambda: [layers.multiply(layers.tanh(x), y), x],
                       lambda: [layers.add(layers.sin(x), layers.scale(x, 3.0)), layers.exp(x)])


def _cond_program():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3], "float64")
        y = layers.data("y", [3], "float64")
        p = layers.data("p", [], "bool")
        outs = _branches(x, y, p)
    return main, list(outs), [x, y]


@pytest.mark.parametrize("taken", [True, False])
def test_cond_forward_agrees_with_reverse(taken):
    main, outs, ins = _cond_program()
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((2, 3)), "y": rng.standard_normal(3), "p": np.array(taken)}
    lhs, rhs = dot_product_sides(main, outs, ins, feed, rng)
    assert lhs == pytest.approx(rhs, rel=1e-10)


@pytest.mark.parametrize("taken", [True, False])
def test_cond_tangent_is_the_taken_branch_derivative(taken):
    main, (a, b), (x, y) = _cond_program()
    with program_guard(main, Program()):
        v = layers.data("v", [2, 3], "float64")
        ta, tb = forward_gradients([a, b], [x], [v])
    rng = np.random.default_rng(1)
    xv, yv, vv = rng.standard_normal((2, 3)), rng.standard_normal(3), rng.standard_normal((2, 3))
    got_a, got_b = Executor().run(main, feed={"x": xv, "y": yv, "v": vv, "p": np.array(taken)}, fetch_list=[ta, tb])
    if taken:
        want_a, want_b = vv * (1 - np.tanh(xv) ** 2) * yv, vv
    else:
        want_a, want_b = vv * (np.cos(xv) + 3.0), vv * np.exp(xv)
    np.testing.assert_allclose(got_a, want_a, rtol=1e-12)
    np.testing.assert_allclose(got_b, want_b, rtol=1e-12)
    tangent_cond = [op for op in main.global_block().ops if op.type == "cond" and op.role == "forward_grad"]
    assert len(tangent_cond) == 1 and tangent_cond[0].forward_op.type == "cond"


def _loop(steps: int | None):
    """The RNN of the loop tests (a while_loop, or unrolled ``steps`` times): its loss and (w, h0, xs)."""
    main, loss, _ = build(steps)
    block = main.global_block()
    return main, loss, [block.var("w"), block.var("h0"), block.var("xs")]


@pytest.mark.parametrize("steps", [0, 1, 5])
def test_while_carries_tangents_like_the_unrolled_loop(steps):
    feed = feed_for(steps, seed=steps)
    rng = np.random.default_rng(2)
    directions = {"v_w": rng.standard_normal((H, H)), "v_h0": rng.standard_normal((B, H)),
                  "v_xs": rng.standard_normal((steps, B, H))}
    got = []
    for program_steps in (None, steps):
        main, out, ins = _loop(program_steps)
        with program_guard(main, Program()):
            vs = [layers.data(n, list(x.shape), "float64") for n, x in zip(directions, ins)]
            (t,) = forward_gradients(out, ins, vs)
        got.append(run(main, [t], {**feed, **directions}))
    np.testing.assert_allclose(got[0][0], got[1][0], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("steps", [0, 3])
def test_while_forward_agrees_with_reverse(steps):
    main, out, ins = _loop(None)
    lhs, rhs = dot_product_sides(main, [out], ins[:2], feed_for(steps, seed=steps), np.random.default_rng(4))
    assert lhs == pytest.approx(rhs, rel=1e-10, abs=1e-12)


def test_the_loop_record_has_a_tangent_too():
    """History (read by a backward loop) moves with the loop: its tangent agrees with reverse mode."""
    main, _, (w, h0, _) = _loop(None)
    op = next(op for op in main.global_block().ops if op.type == "while")
    history = main.global_block().var(op.output("History")[1])
    with program_guard(main, Program()):
        vw, vh = layers.data("vw", [H, H], "float64"), layers.data("vh", [B, H], "float64")
        u = layers.data("u", [-1, B, H], "float64")
        (t,) = forward_gradients(history, [w, h0], [vw, vh])
        gw, gh = gradients(history, [w, h0], target_gradients=[u])
    rng = np.random.default_rng(6)
    feed = {**feed_for(4, seed=4), "vw": rng.standard_normal((H, H)), "vh": rng.standard_normal((B, H)),
            "u": rng.standard_normal((4, B, H))}
    jv, jtw, jth = Executor().run(main, feed=feed, fetch_list=[t, gw, gh])
    assert np.sum(jv * feed["u"]) == pytest.approx(np.sum(jtw * feed["vw"]) + np.sum(jth * feed["vh"]), rel=1e-10)
