"""``gradgen run --steps N`` prints the fetched values during the run, every ``--log-every K`` steps, and its
progress bar shows the loss (issue 34, item 6)."""
from __future__ import annotations

import io
import re
import sys

import numpy as np
import pytest

from gradgen.framework import optimizer
from gradgen.framework.tools.cli import main as cli
from gradgen.program import Program, layers, program_guard
from gradgen.program.initializer import Constant


@pytest.fixture
def training(tmp_path):
    """A one-weight least-squares fit by SGD: its loss falls every step."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 1], "float64")
        w = layers.create_parameter([1, 1], "float64", name="w", initializer=Constant(0.0))
        loss = layers.reduce_mean(layers.square(x @ w - x), name="loss")
        optimizer.SGD(0.1).minimize(loss)
    main.save(tmp_path / "main.json")
    startup.save(tmp_path / "startup.json")
    np.save(tmp_path / "x.npy", np.array([[1.0], [2.0]]))
    return ["run", str(tmp_path / "main.json"), "--startup", str(tmp_path / "startup.json"), "--feed",
            f"x={tmp_path / 'x.npy'}", "--fetch", "loss,w"]


def _logged(out: str) -> list[int]:
    return [int(m) for m in re.findall(r"^step (\d+)/\d+: loss [\d.e+-]+, w [\d.e+-]+$", out, re.M)]


def test_log_every_prints_the_values_every_k_steps(training, capsys):
    assert cli([*training, "--steps", "7", "--log-every", "3"]) == 0
    out = capsys.readouterr().out
    assert _logged(out) == [3, 6], out
    losses = [float(v) for v in re.findall(r"^step \d+/7: loss ([\d.e+-]+)", out, re.M)]
    assert losses[0] > losses[1] > 0  # the values of those steps, not one value repeated
    assert out.count("loss: float64[]") == 1  # the last step's values print in full once, as before


def test_by_default_ten_lines_a_run_and_none_with_zero(training, capsys):
    assert cli([*training, "--steps", "20"]) == 0
    assert _logged(capsys.readouterr().out) == [2, 4, 6, 8, 10, 12, 14, 16, 18]
    assert cli([*training, "--steps", "20", "--log-every", "0"]) == 0
    assert _logged(capsys.readouterr().out) == []


def test_the_bar_shows_the_latest_loss_on_a_terminal(training, capsys, monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    assert cli([*training, "--steps", "5", "--log-every", "0"]) == 0
    final = screen.getvalue().rsplit("\r", 1)[-1]
    assert "5/5" in final and re.search(r"loss \d\.\d+", final), final
