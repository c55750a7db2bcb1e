"""The builder refuses a Variable of another program: looked up by name it would silently be this program's var
of that name (another dtype and shape). Names that are not str are refused as well, naming the op and slot."""
import numpy as np
import pytest

from gradgen.framework import Executor
from gradgen.program import OpError, Program, ProgramError, layers, program_guard


def _two_programs():
    """(a's x: int64[5, 5], b, b's x: float64[2]); both named 'x'."""
    a = Program()
    with program_guard(a, Program()):
        xa = layers.data("x", [5, 5], "int64")
    b = Program()
    with program_guard(b, Program()):
        xb = layers.data("x", [2], "float64")
    return xa, b, xb


FOREIGN = r"'x' \(int64\[5, 5\]\) is a var of another program.*this program's own 'x' is float64\[2\]"

BUILDERS = {
    "layer": lambda xa, xb: layers.tanh(xa),
    "operator with a number": lambda xa, xb: xa + 1,
    "operator, foreign on the right": lambda xa, xb: xb * xa,
    "negation": lambda xa, xb: -xa,
    "matmul": lambda xa, xb: xb @ xa,
    "append_op input": lambda xa, xb: xb.block.append_op("tanh", {"X": xa}, {"Out": ["o"]}),
    "append_op input list": lambda xa, xb: xb.block.append_op("sum", {"X": [xb, xa]}, {"Out": ["o"]}),
    "append_op output": lambda xa, xb: xb.block.append_op("tanh", {"X": [xb]}, {"Out": xa}),
    "assign's output": lambda xa, xb: layers.assign(xb, output=xa),
    "cond's pred": lambda xa, xb: layers.cond(xa, lambda: xb, lambda: xb),
    "cond's branch result": lambda xa, xb: layers.cond(layers.reduce_sum(xb) > 0, lambda: xa, lambda: xb),
    "while_loop's loop var": lambda xa, xb: layers.while_loop(lambda v: layers.reduce_sum(v) > 0, lambda v: v, [xa]),
    "custom gradient input": lambda xa, xb: layers.custom_gradient(layers.tanh, grad_fn=lambda i, o, g: g[0])(xa),
}


@pytest.mark.parametrize("build", BUILDERS.values(), ids=list(BUILDERS))
def test_a_variable_of_another_program_with_the_same_name_is_an_error(build):
    xa, b, xb = _two_programs()
    with program_guard(b, Program()), pytest.raises(ProgramError, match=FOREIGN):
        build(xa, xb)


def test_the_error_names_the_op_and_slot_and_nothing_is_appended():
    xa, b, xb = _two_programs()
    with program_guard(b, Program()), pytest.raises(ProgramError, match=r"op #0 \(tanh\).*input slot 'X': " + FOREIGN):
        layers.tanh(xa)
    assert b.global_block().ops == []


def test_a_variable_of_another_program_without_such_a_name_is_an_error():
    xa, _, _ = _two_programs()
    other = Program()
    with program_guard(other, Program()), pytest.raises(ProgramError, match="this program has no var named 'x'"):
        layers.tanh(xa)


def test_a_variable_of_the_program_a_clone_was_made_from_stands_for_the_clones_var():
    """As in feed and fetch: ``main.clone()`` keeps every var, so main's Variables still mean the same vars."""
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2], "float64")
    clone = main.clone()
    with program_guard(clone, Program()):
        y = layers.tanh(x)
    assert y.block.program is clone
    (got,) = Executor().run(clone, feed={"x": np.array([0.5, -1.0])}, fetch_list=[y])
    np.testing.assert_allclose(got, np.tanh([0.5, -1.0]), rtol=1e-15)


def test_a_clone_whose_var_changed_type_refuses_the_originals_variable():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2], "float64")
    clone = main.clone()
    clone.global_block().remove_var("x")
    clone.global_block().create_var("x", [3], "float32")
    with program_guard(clone, Program()), pytest.raises(ProgramError, match=r"'x' \(float64\[2\]\) is a var of "
                                                                            r"another.*own 'x' is float32\[3\]"):
        layers.tanh(x)


@pytest.mark.parametrize("slot_value", [b"x\xff", 3, None.__class__], ids=["bytes", "int", "type"])
@pytest.mark.parametrize("kind", ["input", "output"])
def test_a_var_name_that_is_not_a_str_is_an_op_error_naming_the_op_and_slot(slot_value, kind):
    b = Program()
    block = b.global_block()
    block.create_var("x", [2], "float64")
    inputs, outputs = ({"X": [slot_value]}, {"Out": ["o"]}) if kind == "input" else ({"X": ["x"]}, {"Out": slot_value})
    with pytest.raises(OpError, match=rf"op #0 \(tanh\).*{kind} slot '{'X' if kind == 'input' else 'Out'}' holds a "
                                      rf"{type(slot_value).__name__}"):
        block.append_op("tanh", inputs, outputs)
    assert block.ops == []
