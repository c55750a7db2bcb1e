"""Rough edges of the gradgen command (issue 24): each test failed before its fix."""
from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

from gradgen.framework import optimizer
from gradgen.framework.tools.cli import main
from gradgen.framework.tools.cli_values import CliError, npy_file_name
from gradgen.framework.tools.modes import compare_modes
from gradgen.framework.tools.summary import summary_text
from gradgen.program import Program, layers, program_guard

from .test_cli import gradgen, trained  # noqa: F401  (trained is a fixture)


def _run_args(out, *more):
    return ["run", str(out / "main.json"), "--feed", f"x={out / 'x.npy'}", "--feed", f"y={out / 'y.npy'}",
            "--params", str(out / "params.npz"), *more]


def _one_error_line(err: str, message: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gradgen: error: "), err
    assert message in lines[0], lines[0]


def test_export_onnx_without_the_extra_says_what_to_install(trained, tmp_path):  # noqa: F811
    out, _ = trained
    script = ("import sys; sys.modules['onnx'] = None; sys.modules['onnxruntime'] = None\n"
              "from gradgen.framework.tools.cli import main\n"
              f"sys.exit(main(['export-onnx', {str(out / 'main.json')!r}, '-o', {str(tmp_path / 'm.onnx')!r}]))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    _one_error_line(done.stderr, "the ONNX tools need the 'onnx' package: pip install 'gradgen[onnx]'")


def test_debug_is_accepted_after_the_subcommand_too(trained, capsys):  # noqa: F811
    out, _ = trained
    assert main(_run_args(out, "--fetch", "nope")) == 1
    for args in (["--debug", *_run_args(out, "--fetch", "nope")], [*_run_args(out, "--fetch", "nope"), "--debug"]):
        with pytest.raises(CliError, match="fetched var 'nope'"):
            main(args)


@pytest.mark.parametrize("option,typo,meant", [("--fetch", "los", "loss"), ("--feed", "x_={x}", "x")])
def test_a_mistyped_var_name_gets_a_suggestion(trained, capsys, option, typo, meant):  # noqa: F811
    out, _ = trained
    args = _run_args(out, "--fetch", "loss") if option == "--feed" else _run_args(out, option, typo)
    if option == "--feed":
        args += ["--feed", typo.format(x=out / "x.npy")]
    assert main(args) == 1
    _one_error_line(capsys.readouterr().err, f"did you mean '{meant}'?")


def test_backward_refuses_a_loss_that_is_not_one_number(tmp_path, capsys):
    main_program = Program()
    with program_guard(main_program, Program()):
        x = layers.data("x", [3], "float64")
        w = layers.create_parameter([3], "float64", name="w")
        layers.tanh(x * w, name="y")
        layers.reduce_sum(layers.tanh(x * w), name="s")
    main_program.save(tmp_path / "p.json")
    assert main(["backward", str(tmp_path / "p.json"), "--loss", "y", "-o", str(tmp_path / "b.json")]) == 1
    _one_error_line(capsys.readouterr().err, "--loss 'y' is float64[3]: a loss is one number")
    assert not (tmp_path / "b.json").exists()
    assert main(["backward", str(tmp_path / "p.json"), "--loss", "s", "-o", str(tmp_path / "b.json")]) == 0


def test_modes_on_a_training_program_raises_no_numpy_warnings():
    program = Program()
    with program_guard(program, Program()):
        x = layers.data("x", [-1, 3], "float64")
        w = layers.create_parameter([3, 2], "float64", name="w")
        loss = layers.reduce_sum(layers.square(x @ w), name="loss")
        optimizer.Adam(0.01).minimize(loss)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # random Adam state (a negative second moment) made sqrt warn
        reports = compare_modes(program, ["loss"], ["x"], {"x": (4, 3)}, repeats=1)
    assert [r.mode for r in reports] == ["reverse", "forward"]


def test_summary_columns_follow_long_names():
    program = Program()
    long = "a_var_whose_name_is_much_longer_than_forty_characters_in_all"
    with program_guard(program, Program()):
        x = layers.data("x", [4], "float64")
        layers.tanh(x, name=long)
    text = summary_text(program)
    table = text.split("var bytes")[1].splitlines()[1:]
    assert any(line.split() == [long, "32", "B"] for line in table)
    assert len({len(line) for line in table}) == 1  # the bytes column lines up, the long name included


def test_run_save_writes_one_npy_per_fetch(trained, tmp_path, capsys):  # noqa: F811
    out, _ = trained
    assert main(_run_args(out, "--fetch", "loss,w1@GRAD", "--save", str(tmp_path / "got"))) == 0
    printed = capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "got").iterdir()) == ["loss.npy", "w1@GRAD.npy"]
    loss = np.load(tmp_path / "got" / "loss.npy")
    assert loss.shape == () and f"loss: float64[] {float(loss):.6f}"[:20] in printed
    assert np.load(tmp_path / "got" / "w1@GRAD.npy").shape == (1000, 100)


def test_npy_file_names_are_safe_and_distinct():
    names = ["a@GRAD", "block/x", "block%2Fx", "a b", "..", "w\\\\v"]
    files = [npy_file_name(n) for n in names]
    assert files[0] == "a@GRAD.npy" and files[1] == "block%2Fx.npy"
    assert len(set(files)) == len(files) and not any("/" in f or "\\\\" in f for f in files)
