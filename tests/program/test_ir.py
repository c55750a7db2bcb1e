"""The IR: Variable, Operator, Block and Program, and the builder that fills them."""
import pytest

from gradgen.program import (Block, Operator, Program, ProgramError, Variable, default_main_program, layers,
                             program_guard)


def test_layers_append_to_the_guarded_program_and_initializers_to_startup():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 4], "float64")
        w = layers.create_parameter([4, 3], "float64", name="w")
        y = x @ w
    assert isinstance(y, Variable) and y.block is main.global_block()
    assert [op.type for op in main.global_block().ops] == ["matmul"]
    assert [op.type for op in startup.global_block().ops] == ["uniform_random"]
    assert w.persistable and w.is_parameter and w.trainable and not w.stop_gradient
    assert x.stop_gradient and y.shape == (-1, 3) and y.dtype == "float64"
    assert default_main_program() is not main


def test_operator_helpers():
    main = Program()
    with program_guard(main, Program()):
        a = layers.data("a", [2, 3], "float32")
        parts = layers.split(a, [1, 2], axis=1)
    op = main.global_block().ops[0]
    assert isinstance(op, Operator) and op.type == "split"
    assert op.input("X") == ["a"] and op.output("Out") == [p.name for p in parts]
    assert op.attr("sections") == [1, 2] and op.input_arg_names == ["a"]
    assert op.output_arg_names == [p.name for p in parts] and op.input("Missing") == []


def test_block_var_lookup_walks_ancestors_and_fails_clearly():
    main = Program()
    outer = main.global_block()
    outer.create_var("h", [3], "float64")
    inner = main.create_block(parent_idx=0)
    assert isinstance(inner, Block) and inner.parent_idx == 0 and inner.idx == 1
    assert inner.var("h") is outer.vars["h"]
    with pytest.raises(ProgramError, match=r"block 1: no var named 'nope' here or in an ancestor block"):
        inner.var("nope")
    with pytest.raises(ProgramError, match="already exists"):
        outer.create_var("h", [3])
    with pytest.raises(ProgramError, match="invalid shape"):
        outer.create_var("bad", [-2])


def test_insert_and_remove_ops_and_version_bumps():
    main = Program()
    block = main.global_block()
    block.create_var("x", [3], "float64")
    v0 = main.version
    block.append_op("exp", {"X": "x"}, {"Out": ["e"]})
    block.insert_op(0, "relu", {"X": "x"}, {"Out": ["r"]})
    assert [op.type for op in block.ops] == ["relu", "exp"] and main.version > v0
    removed = block.remove_op(0)
    assert removed.type == "relu" and [op.type for op in block.ops] == ["exp"]
    with pytest.raises(ProgramError, match="no op at index 5"):
        block.remove_op(5)
    with pytest.raises(ProgramError, match="cannot insert an op at index 9"):
        block.insert_op(9, "exp", {"X": "x"}, {"Out": ["e2"]})


def test_clone_is_deep():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        layers.exp(x)
    copy = main.clone()
    copy.global_block().remove_op(0)
    assert len(main.global_block().ops) == 1 and copy.to_json() != main.to_json()


@pytest.mark.parametrize("expr,op_type,attrs", [
    (lambda x: x + 2.0, "scale", {"scale": 1.0, "bias": 2.0}),
    (lambda x: 2.0 + x, "scale", {"scale": 1.0, "bias": 2.0}),
    (lambda x: x - 2.0, "scale", {"scale": 1.0, "bias": -2.0}),
    (lambda x: 2.0 - x, "scale", {"scale": -1.0, "bias": 2.0}),
    (lambda x: x * 3.0, "scale", {"scale": 3.0, "bias": 0.0}),
    (lambda x: 3.0 * x, "scale", {"scale": 3.0, "bias": 0.0}),
    (lambda x: x / 4.0, "scale", {"scale": 0.25, "bias": 0.0}),
    (lambda x: -x, "scale", {"scale": -1.0, "bias": 0.0}),
    (lambda x: x ** 2, "square", {}),
    (lambda x: x ** 3, "pow", {"factor": 3.0}),
])
def test_operator_overloading_with_python_scalars(expr, op_type, attrs):
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2], "float64")
        expr(x)
    op = main.global_block().ops[-1]
    assert op.type == op_type and {k: op.attrs[k] for k in attrs} == attrs


def test_a_scalar_divided_by_a_var_and_var_var_operators():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2], "float64")
        y = layers.data("y", [2], "float64")
        _ = 1.0 / x, x + y, x - y, x * y, x / y, x ** y
    types = [op.type for op in main.global_block().ops]
    assert types == ["fill_constant", "elementwise_div", "elementwise_add", "elementwise_sub", "elementwise_mul",
                     "elementwise_div", "elementwise_pow"]


def test_ops_built_by_the_bundled_examples_name_the_examples_lines():
    from gradgen.framework.tools.examples.mlp import mlp

    callsites = {op.callsite for op in mlp().main.global_block().ops if op.role == "forward"}
    assert callsites and all(c.startswith("mlp.py:") for c in callsites), callsites


_SGD_CALLSITES = """
from gradgen.framework import optimizer
from gradgen.program import Program, layers, program_guard
main, startup = Program(), Program()
with program_guard(main, startup):
    loss = layers.reduce_mean(layers.fc(layers.data("x", [-1, 2], "float64"), 1, name="fc"))
    optimizer.SGD(0.1).minimize(loss)
print([op.callsite for op in main.global_block().ops if op.type == "sgd"])
"""


def test_ops_the_gradgen_command_makes_name_no_line_of_its_console_script(tmp_path):
    """An optimizer's ops made through pip's ``bin/gradgen`` were made by the CLI, not by a user's line: no callsite
    (they used to say "created at gradgen:7"); made by a user's script, they name its line."""
    import subprocess
    import sys

    (tmp_path / "bin").mkdir()
    cases = [(tmp_path / "bin" / "gradgen", "[None, None]"), (tmp_path / "train.py", "['train.py:7', 'train.py:7']")]
    for path, want in cases:
        path.write_text(_SGD_CALLSITES)
        done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == want
