"""Gradients through vars the forward part overwrites: grad ops must see the values their forward op saw."""
from __future__ import annotations

import numpy as np

from gradgen.program import Program, layers, program_guard
from gradgen.framework import append_backward

from .checking import check_op_gradients


def test_an_output_overwritten_later_is_snapshotted_for_its_gradient():
    rng = np.random.default_rng(0)

    def build(a, s):
        mixed = layers.tanh(layers.add(a, s))  # tanh's gradient reads its output
        layers.assign(layers.multiply(mixed, s), output=mixed)
        return mixed

    check_op_gradients(build, {"a": rng.standard_normal((2, 3)), "s": rng.standard_normal((2, 3))})


def test_an_input_overwritten_later_is_snapshotted_for_its_gradient():
    rng = np.random.default_rng(1)

    def build(a):
        x = layers.scale(a, 1.5)
        y = layers.sin(x)  # sin's gradient reads its input
        layers.assign(layers.exp(y), output=x)
        return layers.multiply(x, y)

    check_op_gradients(build, {"a": rng.standard_normal((3, 2))})


def test_a_snapshot_is_one_assign_where_the_value_was_current():
    main = Program()
    with program_guard(main, Program()):
        a = layers.create_parameter([3], "float64", name="a")
        x = layers.sin(a)
        layers.assign(layers.scale(x, 2.0), output=a)  # the parameter's name now holds another value
        loss = layers.reduce_sum(layers.multiply(a, x))
    append_backward(loss)
    ops = main.global_block().ops
    snap = [i for i, op in enumerate(ops) if op.output_arg_names[0].startswith("a@SNAPSHOT")]
    assert len(snap) == 1 and ops[snap[0] + 1].type == "sin" and ops[snap[0]].role == "backward"
    readers = [op for op in ops if op.role == "backward" and ops[snap[0]].output_arg_names[0] in op.input_arg_names]
    assert [op.forward_op.type for op in readers] == ["sin"]


def test_a_custom_gradient_rule_reading_an_outer_var_overwritten_later_sees_the_value_at_the_call():
    """The rule's block reads ``s`` by name from the outer block; a later assign overwrites ``s``. The gradient
    op (a ``call`` of the rule's block) must read the snapshot inside its block too (it failed to build before)."""
    from gradgen.framework import Executor, gradients

    main = Program()
    with program_guard(main, Program()):
        a = layers.data("a", [3], "float64")
        a.stop_gradient = False
        s = layers.scale(a, 2.0)
        square = layers.custom_gradient(lambda x: layers.multiply(x, x),
                                        grad_fn=lambda xs, outs, gs: layers.multiply(gs[0], s))
        y = square(a)
        layers.assign(layers.scale(s, 10.0), output=s)  # s is 20a from here on
        (ga,) = gradients([layers.reduce_sum(layers.add(y, s))], [a])
    a_value = np.array([1.0, 2.0, 3.0])
    (got,) = Executor().run(main, feed={"a": a_value}, fetch_list=[ga])
    np.testing.assert_allclose(got, 2.0 * a_value + 20.0, rtol=1e-15)  # the rule's s (2a), plus d(20a)/da
