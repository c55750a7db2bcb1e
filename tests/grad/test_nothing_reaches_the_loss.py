"""A loss that nothing differentiable reaches: a BackwardError naming the loss and saying why, from
append_backward, minimize, gradients and ``gradgen backward`` (never a networkx error), with the program
left as it was."""
from __future__ import annotations

import pytest

from gradgen.framework import BackwardError, append_backward, gradients, optimizer
from gradgen.program import Program, layers, program_guard
from tests.cli.test_cli import gradgen


def _one_hot_loss(with_parameter: bool):
    """loss = mean(one_hot(label, 100)) (Paddle's backward test), optionally beside an unused parameter."""
    main = Program()
    with program_guard(main, Program()):
        label = layers.data("label", [-1], "int64")
        if with_parameter:
            layers.create_parameter([3], "float64", name="w")
        loss = layers.mean(layers.one_hot(label, 100, "float64"))
    return main, loss


def _no_parameters():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 4], "float64")
        loss = layers.mean(layers.tanh(x))
    return main, loss


CASES = {
    "one_hot": lambda: _one_hot_loss(False),
    "one_hot_beside_a_parameter": lambda: _one_hot_loss(True),
    "no_parameters": _no_parameters,
}


def _ops(program):
    return [op.type for block in program.blocks for op in block.ops]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("api", ["append_backward", "minimize"])
def test_a_backward_error_names_the_loss_and_says_why(case, api):
    main, loss = CASES[case]()
    before = _ops(main)
    with program_guard(main, Program()), pytest.raises(BackwardError) as info:
        if api == "append_backward":
            append_backward(loss)
        else:
            optimizer.SGD(0.1).minimize(loss)
    message = str(info.value)
    assert f"loss '{loss.name}' (float64[])" in message and "has no gradient to take" in message
    if case == "no_parameters" or case == "one_hot":
        assert "no trainable parameters" in message
    else:
        assert "none of its trainable parameters ('w')" in message
    if case.startswith("one_hot"):
        assert "op #0 (one_hot) lets no gradient through" in message
    assert _ops(main) == before  # nothing appended


def test_a_parameter_list_none_of_which_reaches_the_loss():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2], "float64")
        w = layers.create_parameter([2], "float64", name="w")
        v = layers.create_parameter([2], "float64", name="v")
        loss = layers.reduce_sum(x * w)
        with pytest.raises(BackwardError, match=r"none of its trainable parameters \('v'\)"):
            append_backward(loss, parameter_list=[v])
        assert [p.name for p, _ in append_backward(loss, parameter_list=[w])] == ["w"]


def test_no_grad_set_cutting_the_only_path_is_named():
    main = Program()
    with program_guard(main, Program()):
        w = layers.create_parameter([2], "float64", name="w")
        h = layers.tanh(w)
        loss = layers.reduce_sum(h)
        with pytest.raises(BackwardError, match=f"'{h.name}' is in no_grad_set"):
            append_backward(loss, no_grad_set=[h])


def test_gradients_with_no_inputs_is_a_backward_error():
    main, loss = _no_parameters()
    with pytest.raises(BackwardError, match=f"gradients of '{loss.name}' with respect to no inputs"):
        gradients(loss, [])


def test_gradients_of_an_unreached_input_is_none_as_documented():
    main, loss = _one_hot_loss(False)
    assert gradients(loss, [main.global_block().var("label")]) == [None]


def test_a_free_input_var_that_is_not_stop_gradient_still_counts_as_a_start():
    main, loss = _no_parameters()
    main.global_block().var("x").stop_gradient = False
    assert append_backward(loss) == []  # Paddle's rule: x gets a gradient, no parameter does
    assert any(op.role == "backward" for op in main.global_block().ops)


@pytest.mark.parametrize("case", ["one_hot", "no_parameters"])
def test_gradgen_backward_reports_it_as_one_line(case, tmp_path):
    main, loss = CASES[case]()
    main.save(tmp_path / "fwd.json")
    result = gradgen("backward", tmp_path / "fwd.json", "--loss", loss.name, "-o", tmp_path / "bwd.json")
    assert result.returncode == 1
    assert result.stderr.startswith("gradgen: error: ") and result.stderr.count("\n") == 1, result.stderr
    assert f"loss '{loss.name}'" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "bwd.json").exists()
