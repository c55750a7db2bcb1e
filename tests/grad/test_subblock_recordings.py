"""Control-flow makers only record their gradient sub-blocks; the pass builds them, with symbolic zeros."""
import numpy as np
import pytest

from gradgen.framework import Executor, gradients
from gradgen.grad_makers import GRAD_MAKERS, grad_maker
from gradgen.program import Program, default_main_program, layers, program_guard


def _state(program):
    return [(len(b.ops), len(b.vars)) for b in program.blocks]


@pytest.fixture
def makers_checked_for_purity(monkeypatch):
    """Wrap the cond and while makers: each call must leave the program exactly as it found it."""
    calls = []
    for op_type in ("cond", "while"):
        original = GRAD_MAKERS[op_type]

        def spy(g, op, original=original):
            program = default_main_program()  # the tests call gradients inside their program_guard
            before = _state(program)
            grads = original(g, op)
            calls.append((op.type, before == _state(program)))
            return grads

        monkeypatch.setitem(GRAD_MAKERS, op_type, grad_maker(op_type, emits=original.emits)(spy))
    return calls


def _branchy():
    """cond(p, tanh(x) * y, 2 y): the false branch does not read x."""
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        y = layers.data("y", [3], "float64")
        p = layers.data("p", [], "bool")
        out = layers.cond(p, lambda: layers.tanh(x) * y, lambda: layers.scale(y, 2.0))
        gx, gy = gradients(layers.reduce_sum(out), [x, y])
    return main, gx, gy


def test_cond_maker_records_only_and_an_unused_input_gets_zeros_in_its_branch(makers_checked_for_purity):
    main, gx, gy = _branchy()
    assert makers_checked_for_purity == [("cond", True)]
    grad_op = next(op for op in main.global_block().ops if op.type == "cond" and op.role == "backward")
    true_block, false_block = main.block(grad_op.attr("true_block")), main.block(grad_op.attr("false_block"))
    assert [op.type for op in false_block.ops] == ["scale", "fill_zeros_like"]  # dy = 2 dout; dx = zeros
    assert "fill_zeros_like" not in [op.type for op in true_block.ops]
    xs, ys = np.array([0.1, -0.5, 2.0]), np.array([1.0, 2.0, -3.0])
    for taken in (True, False):
        vx, vy = Executor().run(main, feed={"x": xs, "y": ys, "p": np.bool_(taken)}, fetch_list=[gx, gy])
        np.testing.assert_allclose(vx, (1 - np.tanh(xs) ** 2) * ys if taken else 0.0)
        np.testing.assert_allclose(vy, np.tanh(xs) if taken else 2.0)


def test_while_maker_records_only_and_a_zero_gradient_adds_nothing_to_its_accumulator(makers_checked_for_purity):
    """w steers the loop body only through a comparison: its gradient is a symbolic zero, the accumulator stays."""
    main = Program()
    with program_guard(main, Program()):
        h0 = layers.data("h0", [3], "float64")
        w = layers.data("w", [3], "float64")
        n = layers.data("n", [], "int64")

        def body(t, h):
            mask = layers.cast(layers.less_than(h, w), "float64")
            return [layers.add(t, layers.fill_constant([], "int64", 1)), layers.tanh(h) * mask + h]

        _, h = layers.while_loop(lambda t, h: layers.less_than(t, n), body, [layers.fill_constant([], "int64", 0), h0])
        gh0, gw = gradients(layers.reduce_sum(h), [h0, w])
    assert makers_checked_for_purity == [("while", True)]
    grad_op = next(op for op in main.global_block().ops if op.type == "while" and op.role == "backward")
    body_block = main.block(grad_op.attr("body_block"))
    accumulator = grad_op.attr("body_params")[-1]
    assert grad_op.attr("body_outs")[-1] == accumulator, "adding a zero gradient must leave the accumulator as it is"
    assert not [op for op in body_block.ops if accumulator in op.input_arg_names]
    h0s, ws = np.array([0.3, -1.0, 2.0]), np.array([1.0, 0.0, 1.0])
    vh0, vw = Executor().run(main, feed={"h0": h0s, "w": ws, "n": np.int64(2)}, fetch_list=[gh0, gw])
    np.testing.assert_array_equal(vw, 0.0)
    h1 = np.tanh(h0s) * (h0s < ws) + h0s
    expected = ((1 - np.tanh(h1) ** 2) * (h1 < ws) + 1) * ((1 - np.tanh(h0s) ** 2) * (h0s < ws) + 1)
    np.testing.assert_allclose(vh0, expected)
