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
