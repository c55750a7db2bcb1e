"""The verifier reports every problem at once; the printer shows roles, types and provenance."""
import pytest

from gradgen.program import Program, VerificationError, layers, program_guard, verify


def _program():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3], "float64")
        h = layers.relu(x)
        layers.exp(h)
    return main


def test_a_sound_program_has_no_problems():
    assert verify(_program()) == []


def test_several_problems_are_reported_together():
    main = _program()
    block = main.global_block()
    block.ops.reverse()  # exp now reads relu_0 before relu writes it
    block.ops[1].attrs["bogus"] = 1
    sub = main.create_block(parent_idx=0)
    sub.parent_idx = 5
    problems = verify(main, raise_on_error=False)
    assert len(problems) == 3, problems
    assert any("reads 'relu_0' before op #1 (relu) writes it" in p for p in problems)
    assert any("op #1 (relu)" in p and "unknown attr 'bogus'" in p for p in problems)
    assert any("block 1: parent_idx 5" in p for p in problems)
    with pytest.raises(VerificationError) as err:
        verify(main)
    assert err.value.problems == problems and "3 problem(s)" in str(err.value)


def test_printer_groups_roles_and_names_the_forward_op_of_generated_ops():
    main = _program()
    block = main.global_block()
    fwd = block.ops[1]
    block.append_op("elementwise_mul", {"X": "exp_0", "Y": "exp_0"}, {"Out": ["relu_0@GRAD"]}, role="backward",
                    forward_op=fwd)
    text = str(main)
    assert text.splitlines()[:4] == ["program (1 block)", "block 0 (global):", "  vars:", "    x  float64[2, 3]  (stop_gradient)"]
    assert "  forward:\n    #0 relu_0: float64[2, 3] = relu(X=x)\n    #1 exp_0: float64[2, 3] = exp(X=relu_0)" in text
    assert "  backward:\n    #2 relu_0@GRAD: float64[2, 3] = elementwise_mul(X=exp_0, Y=exp_0)  <- grad of #1 exp" in text


def test_printer_shows_only_non_default_attrs_and_sub_blocks_nested():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2], "float64")
        layers.scale(x, 2.0)
        layers.leaky_relu(x)
    text = str(main)
    assert "scale(X=x, scale=2.0)" in text and "leaky_relu(X=x)" in text


def test_printer_hides_list_attrs_equal_to_their_default_and_shows_the_others():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3], "float64")
        layers.reduce_sum(x)            # dim=[] is the default: not shown
        layers.reduce_sum(x, dim=[1])   # shown
        layers.scale(x, 1)              # an int scale is not the float default 1.0: shown
    lines = [line for line in str(main).splitlines() if "reduce_sum(" in line]
    assert "dim=" not in lines[0] and "dim=[1]" in lines[1]
    assert "scale=1)" in str(main)
