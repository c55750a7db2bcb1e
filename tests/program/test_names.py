"""``name=`` names what a layer returns (issue 34, item 1), for every layer; a name given twice is an error; the
table of design_docs/names.md is the one ``names_table`` builds."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gradgen.framework import Executor
from gradgen.framework.tools.cli import main as cli
from gradgen.program import Program, ProgramError, layers, program_guard
from gradgen.program.layers.names_table import NAME, build, layers_taking_name, returned_names, with_table

DOC = Path(__file__).resolve().parents[2] / "design_docs" / "names.md"


def _flat(names) -> list[str]:
    return [names] if isinstance(names, str) else [n for item in names for n in _flat(item)]


def test_names_md_holds_the_generated_table():
    doc = DOC.read_text(encoding="utf-8")
    assert with_table(doc) == doc, "stale: python -m gradgen.program.layers.names_table --write design_docs/names.md"


def test_every_public_layer_with_a_name_argument_is_covered():
    covered = layers_taking_name()
    assert {"fc", "conv2d", "softmax_with_cross_entropy", "batch_norm", "lstm", "relu", "split"} <= set(covered)
    assert len(covered) > 100


@pytest.mark.parametrize("layer", layers_taking_name())
def test_name_names_what_the_layer_returns(layer):
    result, made = build(layer)
    names = returned_names(result)
    if layer == "custom_gradient":  # name= names the rule; the function's results are the rule's
        assert names == f"{NAME}_0"
    elif isinstance(names, list):  # pieces: NAME.0, NAME.1, ... (split), NAME.out0, ... (while_loop)
        assert names and all(n.startswith(f"{NAME}.") for n in names), names
    else:
        first, *rest = _flat(names)
        assert first == NAME, f"{layer}(name={NAME!r}) returned {names}"
        assert all(n.startswith(f"{NAME}.") for n in rest), names
    for var in made:  # parameters and state take their names from NAME too: NAME.w, NAME.b, NAME.mean, ...
        if var.persistable:
            assert var.name == NAME or var.name.startswith(f"{NAME}."), (layer, var.name)


@pytest.mark.parametrize("layer", layers_taking_name())
def test_a_name_given_twice_is_an_error_that_names_it(layer):
    program = Program()
    first, _ = build(layer, program)
    if layer == "custom_gradient":  # a rule name may repeat: each call's results get names of their own
        second, _ = build(layer, program)
        assert returned_names(second) != returned_names(first)
        return
    with pytest.raises(ProgramError, match=f"'{NAME}"):
        build(layer, program)


def test_fc_names_its_output_and_its_parameters():
    with program_guard(Program(), Program()):
        logits = layers.fc(layers.data("x", [-1, 4]), 10, act="relu", name="logits")
        params = [p.name for p in logits.block.program.all_parameters()]
    assert logits.name == "logits" and params == ["logits.w", "logits.b"]


def _classifier():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 4])
        label = layers.data("label", [-1, 1], "int64")
        logits = layers.fc(x, 3, name="logits")
        loss = layers.softmax_with_cross_entropy(logits, label, reduction="mean", name="loss")
    return main, startup, loss


def test_the_mean_loss_is_the_var_called_loss_and_its_softmax_loss_softmax():
    main, _, loss = _classifier()
    assert loss.name == "loss" and loss.shape == ()
    op = next(op for op in main.global_block().ops if op.type == "softmax_with_cross_entropy")
    assert op.output("Softmax") == ["loss.softmax"]
    assert "Softmax=loss.softmax" in str(main)


def test_fetching_loss_by_name_gives_the_mean(tmp_path, capsys):
    main, startup, loss = _classifier()
    rng = np.random.default_rng(0)
    x, label = rng.standard_normal((5, 4)).astype("float32"), rng.integers(0, 3, (5, 1))
    exe = Executor()
    exe.run(startup)
    by_name, softmax, logits = exe.run(main, feed={"x": x, "label": label},
                                       fetch_list=["loss", "loss.softmax", "logits"])
    rows = -np.log(softmax[np.arange(5), label[:, 0]])
    assert by_name.shape == () and np.isclose(by_name, rows.mean(), rtol=1e-5)
    np.testing.assert_allclose(softmax, np.exp(logits) / np.exp(logits).sum(1, keepdims=True), rtol=1e-5)

    # the README's way: a saved program, `gradgen run --fetch loss`
    main.save(tmp_path / "main.json")
    startup.save(tmp_path / "startup.json")
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "label.npy", label)
    assert cli(["run", str(tmp_path / "main.json"), "--startup", str(tmp_path / "startup.json"),
                "--feed", f"x={tmp_path / 'x.npy'}", "--feed", f"label={tmp_path / 'label.npy'}",
                "--fetch", "loss"]) == 0
    assert capsys.readouterr().out.startswith("loss: float32[] ")


def test_a_name_used_twice_leaves_the_program_as_it_was_and_says_where_the_first_is():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 4])
        layers.relu(x, name="h")
        ops, names = len(main.global_block().ops), list(main.global_block().vars)
        with pytest.raises(ProgramError, match=r"fc\(name='h'\): the program already has a var named 'h' "
                                               r"\(float32\[-1, 4\], made by block 0, op #0 \(relu\)"):
            layers.fc(x, 3, name="h")
    assert len(main.global_block().ops) == ops and list(main.global_block().vars) == names


def test_a_side_output_name_already_taken_is_an_error_too():
    with program_guard(Program(), Program()):
        x = layers.data("x", [-1, 4])
        layers.relu(x, name="d.mask")
        with pytest.raises(ProgramError, match="'d.mask'"):
            layers.dropout(x, name="d")


def test_a_layer_that_hands_back_its_input_gives_a_copy_called_name():
    from gradgen.program.layers.naming import named

    same = named(lambda x, name=None: x)
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 4])
        y = same(x, name="y")
    assert (x.name, y.name) == ("x", "y") and y.stop_gradient
    assert [(op.type, op.input("X"), op.output("Out")) for op in main.global_block().ops] == [("assign", ["x"], ["y"])]
