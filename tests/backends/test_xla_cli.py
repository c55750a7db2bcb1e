"""The command line on the xla backend: ``--backend xla`` for run and example, and ``show --backend xla``, whose
lowered program locates every instruction at the gradgen op it came from."""
from __future__ import annotations

import re

import numpy as np
import pytest

from gradgen.framework import optimizer
from gradgen.framework.tools.cli import main
from gradgen.program import Program, layers, program_guard
from tests.backends.xla_harness import need_jax


def _files(tmp_path):
    prog, startup = Program(), Program()
    with program_guard(prog, startup):
        x = layers.data("x", [-1, 4], "float64")
        y = layers.data("y", [-1, 1], "float64")
        h = layers.fc(x, 8, act="tanh", name="h")
        loss = layers.reduce_mean(layers.square(layers.fc(h, 1, name="p") - y), name="loss")
        optimizer.SGD(0.1).minimize(loss)
    prog.save(str(tmp_path / "main.json"))
    startup.save(str(tmp_path / "startup.json"))
    rng = np.random.default_rng(0)
    np.save(tmp_path / "x.npy", rng.standard_normal((5, 4)))
    np.save(tmp_path / "y.npy", rng.standard_normal((5, 1)))
    return prog


def test_show_prints_stablehlo_located_at_every_gradgen_op(tmp_path, capsys):
    need_jax()
    prog = _files(tmp_path)
    assert main(["show", str(tmp_path / "main.json"), "--backend", "xla", "--fetch", "loss"]) == 0
    text = capsys.readouterr().out
    assert "stablehlo.tanh" in text and "stablehlo.dot_general" in text
    located = set(re.findall(r"b0/op(\d+):(\w+)", text))
    ops = prog.global_block().ops
    for index, op_type in located:
        assert ops[int(index)].type == op_type
    # every op that computes something shows up (assign and friends may vanish into their neighbours)
    for i, op in enumerate(ops):
        if op.type in ("matmul", "tanh", "tanh_grad", "sgd"):
            assert (str(i), op.type) in located, f"op #{i} {op.type} has no instruction located at it"


def test_run_trains_on_either_backend_with_the_same_result(tmp_path, capsys):
    need_jax()
    _files(tmp_path)
    for backend in ("numpy", "xla"):
        args = ["run", str(tmp_path / "main.json"), "--startup", str(tmp_path / "startup.json"), "--feed",
                f"x={tmp_path / 'x.npy'}", "--feed", f"y={tmp_path / 'y.npy'}", "--fetch", "loss", "--steps", "3",
                "--save", str(tmp_path / backend), "--backend", backend]
        assert main(args) == 0
    capsys.readouterr()
    np.testing.assert_allclose(np.load(tmp_path / "xla" / "loss.npy"), np.load(tmp_path / "numpy" / "loss.npy"),
                               rtol=1e-12)


def test_an_unknown_backend_is_refused_by_the_parser(tmp_path, capsys):
    _files(tmp_path)
    with pytest.raises(SystemExit):
        main(["run", str(tmp_path / "main.json"), "--fetch", "loss", "--backend", "tpu"])
    assert "invalid choice: 'tpu'" in capsys.readouterr().err
