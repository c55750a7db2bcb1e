"""The gradgen command given wrong files, wrong numbers, missing directories and Ctrl-C."""
from __future__ import annotations

import os
import signal
import subprocess

import numpy as np
import pytest

from gradgen.framework.tools.cli_values import ArgumentError
from gradgen.framework.tools.summary import summarize, summary_text
from gradgen.program import Program, layers, program_guard

from .test_cli import GRADGEN, gradgen, trained  # noqa: F401  (trained is a fixture)


def _one_error_line(result, message: str) -> None:
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gradgen: error: "), result.stderr
    assert message in lines[0], lines[0]


def test_params_given_a_npy_file(trained, tmp_path):  # noqa: F811
    out, _ = trained
    np.save(tmp_path / "w.npy", np.zeros(3))
    result = gradgen("run", out / "main.json", "--feed", f"x={out / 'x.npy'}", "--feed", f"y={out / 'y.npy'}",
                     "--params", tmp_path / "w.npy", "--fetch", "loss")
    _one_error_line(result, "not a gradgen parameter file (.npz)")


def test_feed_given_an_npz_file_without_its_name(trained):  # noqa: F811
    out, _ = trained
    result = gradgen("run", out / "main.json", "--feed", f"x={out / 'params.npz'}", "--feed", f"y={out / 'y.npy'}",
                     "--fetch", "loss")
    _one_error_line(result, "the archive holds no array 'x' (it holds w1, w2, learning_rate_float64_0); give --feed ")


@pytest.mark.parametrize("command", ["run", "example"])
def test_negative_steps_are_a_usage_error(trained, command):  # noqa: F811
    out, _ = trained
    args = ["run", out / "main.json", "--fetch", "loss"] if command == "run" else ["example", "mlp", "--quiet"]
    result = gradgen(*args, "--steps", "-3")
    assert result.returncode == 2
    assert "argument --steps: expected a whole number >= 0, got -3" in result.stderr
    assert "Traceback" not in result.stderr


def test_dot_into_a_missing_directory(trained, tmp_path):  # noqa: F811
    out, _ = trained
    for name in ("g.svg", "g.dot"):
        result = gradgen("dot", out / "main.json", "-o", tmp_path / "missing" / name)
        _one_error_line(result, f"cannot write {tmp_path / 'missing' / name}: no such directory")


def test_ctrl_c_is_one_line_and_exit_code_130(tmp_path):
    proc = subprocess.Popen(GRADGEN + ["example", "mlp", "--steps", "100000000", "--quiet", "--out", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    for line in proc.stdout:  # wait until training has started
        if line.startswith("## after append_backward"):
            break
    proc.send_signal(signal.SIGINT)
    try:
        _, stderr = proc.communicate(timeout=60)
    finally:  # a child that missed the signal must not outlive the test (one ran on for 50 minutes)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130
    assert stderr == "gradgen: interrupted\n"


def _huge_program() -> Program:
    main = Program()
    with program_guard(main, Program()):
        layers.create_parameter([2**32, 2**32], "float64", name="w")
        x = layers.data("x", [-1, 3], "float32")
        layers.scale(x, 2.0, name="y")
    return main


def test_summary_counts_huge_shapes_exactly():
    s = summarize(_huge_program(), {"x": (5, 3)})
    assert s["parameter_elements"] == 2**64 and s["parameter_bytes"] == 2**67
    assert s["var_bytes"]["w"] == 2**67 and s["var_bytes"]["y"] == 60
    text = summary_text(_huge_program())
    assert "(18446744073709551616 elements, 128.0 EiB)" in text


def test_summary_rejects_negative_feed_shapes(tmp_path):
    with pytest.raises(ArgumentError, match="negative dim"):
        summarize(_huge_program(), {"x": (-5, 3)})
    _huge_program().save(tmp_path / "main.json")
    result = gradgen("summary", tmp_path / "main.json", "--feed-shape", "x=-5,3")
    _one_error_line(result, "--feed-shape x: dims must be >= 0")


def test_an_engine_that_cannot_run_the_program_says_which_ops_on_one_line(tmp_path, capsys):
    """The refusal lists each op after its colon (no ":;"), one error line whatever the number of ops."""
    from gradgen.framework.tools.cli import main
    from tests.backends.test_torch_backend import need_torch

    need_torch()
    program = Program()
    with program_guard(program, Program()):
        x = layers.data("x", [3], "float64")
        one, two = layers.fill_constant([], "int64", 1), layers.fill_constant([], "int64", 2)
        layers.while_loop(lambda i, h: layers.less_than(i, two),
                          lambda i, h: [layers.add(i, one), layers.scale(h, 2.0)],
                          [layers.fill_constant([], "int64", 0), x], max_iterations=10)
    program.save(str(tmp_path / "loop.json"))
    assert main(["show", str(tmp_path / "loop.json"), "--backend", "torch"]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gradgen: error: the torch backend cannot run this program: "
                                                   "block 0, op #"), lines
    assert ":;" not in lines[0] and "(while)" in lines[0]
