"""The installed ``gradgen`` command, run as a user runs it: every subcommand, and its error paths."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

GRADGEN = [shutil.which("gradgen")] if shutil.which("gradgen") else [sys.executable, "-m", "gradgen.framework"]


def gradgen(*args, cwd=None):
    return subprocess.run(GRADGEN + [str(a) for a in args], capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The mlp example trained briefly, with its files on disk."""
    out = tmp_path_factory.mktemp("mlp")
    result = gradgen("example", "mlp", "--steps", "3", "--out", out, "--quiet")
    assert result.returncode == 0, result.stderr
    return out, result.stdout


def test_help_and_version():
    assert "example" in gradgen("--help").stdout
    result = gradgen("--version")
    assert result.returncode == 0 and result.stdout.startswith("gradgen ")
    for command in ("example", "show", "backward", "run", "check-grad", "dot", "ops", "summary"):
        result = gradgen(command, "--help")
        assert result.returncode == 0 and "usage: gradgen " + command in result.stdout


def test_example_prints_forward_and_generated_program_and_writes_files(trained):
    out, stdout = trained
    assert "## forward program" in stdout
    assert "w1@GRAD: float64[1000, 100] = matmul(X=x, Y=h@GRAD, transpose_x=True)  <- grad of #0 matmul" in stdout
    assert "w1: float64[1000, 100] = sgd(" in stdout
    assert "loss:" in stdout and "at step 3" in stdout
    assert sorted(os.listdir(out)) == ["main.json", "params.npz", "startup.json", "x.npy", "y.npy"]


def test_example_list_and_unknown_example():
    listing = gradgen("example", "--list").stdout
    assert "mlp" in listing and "cnn" in listing and "rnn" in listing
    result = gradgen("example", "nope")
    assert result.returncode == 1 and "unknown example 'nope'" in result.stderr
    assert "Traceback" not in result.stderr


def test_show_prints_the_program_and_one_block(trained):
    out, _ = trained
    result = gradgen("show", out / "main.json")
    assert result.returncode == 0 and "backward:" in result.stdout and "optimize:" in result.stdout
    result = gradgen("show", out / "main.json", "--block", "0")
    assert result.returncode == 0 and result.stdout.startswith("block 0")


def test_run_prints_fetched_values_and_saves_params(trained, tmp_path):
    out, _ = trained
    saved = tmp_path / "after.npz"
    result = gradgen("run", out / "main.json", "--feed", f"x={out / 'x.npy'}", "--feed", f"y={out / 'y.npy'}",
                     "--params", out / "params.npz", "--fetch", "loss,w2", "--steps", "2", "--save-params", saved)
    assert result.returncode == 0, result.stderr
    assert "loss: float64[]" in result.stdout and "w2: float64[100, 10] min" in result.stdout
    before, after = np.load(out / "params.npz"), np.load(saved)
    assert not np.array_equal(before["w1"], after["w1"])  # two SGD steps moved the weights


def test_run_memory_prints_the_live_bytes_and_the_peak(trained):
    out, _ = trained
    result = gradgen("run", out / "main.json", "--feed", f"x={out / 'x.npy'}", "--feed", f"y={out / 'y.npy'}",
                     "--params", out / "params.npz", "--fetch", "loss", "--memory")
    assert result.returncode == 0, result.stderr
    assert "resting (feeds and persistable vars read)" in result.stdout
    assert "peak:" in result.stdout and "  w1  " in result.stdout  # the fused update holds the new w1


def test_backward_then_check_grad_on_a_forward_program(tmp_path):
    from gradgen.program import Program, layers, program_guard

    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3, 4], "float64")
        w = layers.data("w", [4, 2], "float64")
        layers.reduce_sum(layers.tanh(x @ w), name="loss")
    main.save(tmp_path / "fwd.json")
    rng = np.random.default_rng(0)
    np.save(tmp_path / "x.npy", rng.standard_normal((3, 4)))
    np.save(tmp_path / "w.npy", rng.standard_normal((4, 2)))
    result = gradgen("backward", tmp_path / "fwd.json", "--loss", "loss", "--wrt", "w", "-o", tmp_path / "bwd.json")
    assert result.returncode == 0, result.stderr
    assert "w -> w@GRAD" in result.stdout
    assert "w@GRAD" in gradgen("show", tmp_path / "bwd.json").stdout
    result = gradgen("check-grad", tmp_path / "fwd.json", "--loss", "loss", "--feed", f"x={tmp_path / 'x.npy'}",
                     "--feed", f"w={tmp_path / 'w.npy'}")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith(("x ", "w "))]
    assert len(lines) == 2 and all(line.endswith("ok") for line in lines)


def test_dot_and_summary_and_ops(trained, tmp_path):
    out, _ = trained
    result = gradgen("dot", out / "main.json", "-o", tmp_path / "g.dot")
    assert result.returncode == 0
    text = (tmp_path / "g.dot").read_text()
    assert text.startswith("digraph") and "style=dashed" in text
    assert gradgen("dot", out / "main.json", "-o", tmp_path / "lr.dot", "--rankdir", "LR").returncode == 0
    assert "rankdir=LR" in (tmp_path / "lr.dot").read_text()
    result = gradgen("summary", out / "main.json", "--feed-shape", "x=64,1000")
    assert "parameters: 2 (101000 elements" in result.stdout
    assert any(line.split() == ["h_relu", "50.0", "KiB"] for line in result.stdout.splitlines())  # 64 x 100 x 8 B
    result = gradgen("ops")
    assert result.returncode == 0 and "MISSING" not in result.stdout
    assert any(line.split()[:3] == ["matmul", "differentiable", "matmul,"] for line in result.stdout.splitlines())


@pytest.mark.parametrize("args,message", [
    (["show", "missing.json"], "no such program file: missing.json"),
    (["run", "{main}", "--fetch", "nope", "--feed", "x={x}", "--feed", "y={y}"], "fetched var 'nope' is not a var"),
    (["run", "{main}", "--fetch", "loss", "--feed", "x={bad_x}", "--feed", "y={y}", "--params", "{params}"],
     "x"),
    (["run", "{main}", "--fetch", "loss", "--feed", "x", "--params", "{params}"], "--feed must look like NAME=VALUE"),
    (["backward", "{main}", "--loss", "nope", "-o", "o.json"], "loss 'nope' is not a var"),
    (["show", "{malformed}"], "not valid JSON"),
    (["show", "{wrong_format}"], "has no field 'format'"),
])
def test_errors_are_one_clear_line_and_a_nonzero_exit(trained, tmp_path, args, message):
    out, _ = trained
    np.save(tmp_path / "bad_x.npy", np.zeros((64, 999)))
    (tmp_path / "malformed.json").write_text("{not json")
    (tmp_path / "wrong_format.json").write_text(json.dumps({"a": 1}))
    paths = {"main": out / "main.json", "x": out / "x.npy", "y": out / "y.npy", "params": out / "params.npz",
             "bad_x": tmp_path / "bad_x.npy", "malformed": tmp_path / "malformed.json",
             "wrong_format": tmp_path / "wrong_format.json"}
    result = gradgen(*[a.format(**paths) for a in args], cwd=tmp_path)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gradgen: error: "), result.stderr
    assert message in lines[0]
