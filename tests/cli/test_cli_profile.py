"""``gradgen run --profile`` and ``gradgen example --profile``: the tables printed after the runs."""
from __future__ import annotations

import re

from .test_cli import gradgen, trained  # noqa: F401  (trained is a fixture)


def _step_rows(stdout: str) -> list[str]:
    table = stdout.split("by step")[1].split("outside the ops")[0]
    return [line for line in table.splitlines()[2:] if line.strip()]


def test_run_profile_prints_every_step_once_with_its_source_line(trained):  # noqa: F811
    out, _ = trained
    result = gradgen("run", out / "main.json", "--feed", f"x={out / 'x.npy'}", "--feed", f"y={out / 'y.npy'}",
                     "--params", out / "params.npz", "--fetch", "loss", "--steps", "3", "--profile")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "loss: float64[]" in text and "profile: 3 runs" in text and "plans built: 1" in text
    for heading in ("by op type", "by step", "outside the ops", "plan lookup", "commit to the scope"):
        assert heading in text
    ops = [int(i) for row in _step_rows(text) for i in re.findall(r"#(\d+) \w+", row.split("(last:")[0])
           or re.findall(r"op #(\d+)", row)]
    assert sorted(ops) == list(range(17))  # the mlp's 17 ops, each in one row
    assert "created at mlp.py:" in text


def test_example_profile(tmp_path):
    result = gradgen("example", "mlp", "--steps", "2", "--quiet", "--out", tmp_path, "--profile")
    assert result.returncode == 0, result.stderr
    assert "profile: 2 runs" in result.stdout and "by op type" in result.stdout
