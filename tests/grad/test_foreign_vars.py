"""A Variable of another Program given to the backward pass is an error naming both vars, never a lookup by name."""
import numpy as np
import pytest

from gradgen.framework import BackwardError, Executor, append_backward, gradients
from gradgen.program import Program, layers, program_guard


def _model(width: int = 3):
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, width], "float64")
        w = layers.create_parameter([width, 1], "float64", name="w")
        loss = layers.reduce_sum(layers.tanh(x @ w))
    return main, x, w, loss


def test_an_input_of_another_program_with_the_same_name_is_an_error():
    _, _, _, loss = _model()
    _, other_x, other_w, _ = _model(width=5)
    with pytest.raises(BackwardError, match=r"inputs\[0\] 'w' \(float64\[5, 1\]\) belongs to another program than "
                                            r"target 'reduce_sum_0'.*program's own 'w' is float64\[3, 1\]"):
        gradients(loss, [other_w])
    with pytest.raises(BackwardError, match=r"inputs\[1\] 'x'"):
        gradients(loss, [loss.block.var("w"), other_x])


def test_an_input_of_another_program_without_such_a_name_is_an_error():
    _, _, _, loss = _model()
    stranger = Program()
    with program_guard(stranger, Program()):
        z = layers.data("z", [3], "float64")
    with pytest.raises(BackwardError, match=r"inputs\[0\] 'z'.*that program has no var named 'z'"):
        gradients(loss, [z])


def test_targets_target_gradients_and_no_grad_set_of_another_program_are_errors():
    main, x, w, loss = _model()
    _, other_x, other_w, other_loss = _model()
    with pytest.raises(BackwardError, match=r"targets\[1\] 'reduce_sum_0'"):
        gradients([loss, other_loss], [w])
    with pytest.raises(BackwardError, match=r"target_gradients\[0\] 'reduce_sum_0'"):
        gradients(loss, [w], target_gradients=[other_loss])
    with pytest.raises(BackwardError, match=r"no_grad_set\[0\] 'x'"):
        gradients(loss, [w], no_grad_set={other_x})
    assert [op.role for op in main.global_block().ops].count("backward") == 0, "a failed call appended ops"


def test_append_backward_rejects_parameters_and_no_grad_vars_of_another_program():
    _, _, _, loss = _model()
    _, other_x, other_w, _ = _model()
    with pytest.raises(BackwardError, match=r"parameter_list\[0\] 'w'.*belongs to another program"):
        append_backward(loss, parameter_list=[other_w])
    with pytest.raises(BackwardError, match=r"no_grad_set\[0\] 'w'"):
        append_backward(loss, no_grad_set=[other_w])


def test_vars_and_names_of_the_targets_program_still_work():
    main, x, w, loss = _model()
    (gw,) = gradients(loss, [w], no_grad_set=["x"])
    xs, ws = np.ones((2, 3)), np.full((3, 1), 0.1)
    (value,) = Executor().run(main, feed={"x": xs, "w": ws}, fetch_list=[gw])
    np.testing.assert_allclose(value, xs.T @ (1 - np.tanh(xs @ ws) ** 2))
