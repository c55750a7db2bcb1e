"""Every generated op names where it comes from, in control flow too, and still does after save and load."""
import re

import pytest

from gradgen.framework import gradients
from gradgen.program import Program, layers, program_guard
from gradgen.program.provenance import op_provenance, producers

from .programs import shared_use_program, trained_example


def _cond_program():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3], "float64")
        y = layers.data("y", [2, 3], "float64")
        p = layers.data("p", [], "bool")
        out = layers.cond(p, lambda: layers.multiply(layers.tanh(x), y),
                          lambda: layers.add(layers.sin(x), layers.scale(x, 3.0)))
        gradients(layers.reduce_sum(out), [x, y])
    return main


def _labels(program):
    positions = {id(op): (b.idx, i) for b in program.blocks for i, op in enumerate(b.ops)}
    labels = []
    for b in program.blocks:
        made_by = producers(b)
        for i, op in enumerate(b.ops):
            if op.role != "forward":
                labels.append(op_provenance(op, i, positions, made_by))
    return labels


@pytest.mark.parametrize("build", [_cond_program, lambda: trained_example("rnn"), lambda: trained_example("cnn"),
                                   shared_use_program])
def test_every_generated_op_points_at_an_op_of_the_program(build):
    program = build()
    positions = {id(op) for b in program.blocks for op in b.ops}
    for b in program.blocks:
        for op in b.ops:
            if op.forward_op is not None:
                assert id(op.forward_op) in positions, (b.idx, op.type)  # not a pruned copy
    labels = _labels(program)
    assert [lab for lab in labels if lab.kind == "none"] == []
    assert "?" not in str(program)
    again = Program.from_json(program.to_json())
    assert [lab.text for lab in _labels(again)] == [lab.text for lab in labels]


def test_cond_gradient_ops_name_the_branch_op_they_differentiate():
    program = _cond_program()
    text = str(program)
    assert "<- grad of block 1 #0 tanh" in text and "<- grad of block 2 #0 sin" in text


def test_while_gradient_plumbing_names_the_loop():
    text = str(trained_example("rnn"))
    assert "while_0@GRAD@acc: float64[1, 16] = elementwise_add(X=while_0@GRAD@body2, Y=w_xh@GRAD@1)  <- grad of " \
           "block 0 #6 while" in text


def test_sum_and_update_labels():
    text = str(shared_use_program())
    assert "<- accumulates 3 contributions to tanh_0@GRAD from #11, #12, #13" in text
    assert "applies w1@GRAD from #14" in str(trained_example("mlp"))


def test_recomputed_forward_ops_say_so():
    from gradgen.framework import append_backward

    main = Program()
    with program_guard(main, Program()):
        h = layers.data("x", [-1, 4], "float64")
        kept = []
        for i in range(6):
            h = layers.relu(h @ layers.create_parameter([4, 4], "float64", name=f"w{i}"))
            kept.append(h)
        append_backward(layers.mean(layers.square(h)), checkpoints=kept[2::3])
    text = str(main)
    assert "@RECOMPUTE" in text and "<- recomputes #" in text
    assert all(lab.kind != "none" for lab in _labels(main))


def test_higher_order_names_follow_the_documented_rule():
    """``v@GRAD...`` is a gradient with respect to ``v``; ``@k`` only tells apart gradients of one var."""
    from .programs import second_order_program

    program = second_order_program()
    block = program.global_block()
    assert block.has_var("x@GRAD") and block.has_var("x@GRAD@1") and block.has_var("x@GRAD@GRAD")
    partial = re.compile(r"(.+)@GRAD@RENAME@\d+")
    partials = [(op, partial.fullmatch(n)) for op in block.ops for n in op.output_arg_names if partial.fullmatch(n)]
    assert any(m.group(1) == "x@GRAD" for _, m in partials)
    for op, m in partials:
        assert m.group(1) in op.forward_op.input_arg_names, (m.group(0), op.forward_op)  # made for a reader of it
