"""design_docs/forward_mode.md stays true: its programs build, and the printed example is what the pass makes."""
from __future__ import annotations

import re
from pathlib import Path

from gradgen.framework import forward_gradients
from gradgen.framework.tools.modes import measure_mode
from gradgen.program import Program, layers, program_guard

DOC = Path(__file__).resolve().parents[2] / "design_docs" / "forward_mode.md"


def test_the_programs_of_the_modes_tables_build(tmp_path, monkeypatch):
    script = re.search(r"python - <<'PY'\n(.*?)\nPY\n", DOC.read_text(), re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(script, str(DOC), "exec"), {})
    for name in ("mlp.json", "curve.json", "square.json"):
        assert (tmp_path / name).exists()
    curve = Program.load(tmp_path / "curve.json")
    assert measure_mode(curve, "forward", ["y"], ["theta"], {}, repeats=1).passes == 3
    square = Program.load(tmp_path / "square.json")
    assert measure_mode(square, "reverse", ["h"], ["x"], {}, repeats=1).passes == 1000


def test_the_printed_example_is_what_the_pass_makes():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 4], "float64")
        w = layers.data("w", [4, 3], "float64")
        v = layers.data("v", [4, 3], "float64")
        h = layers.tanh(x @ w)
        y = layers.reduce_sum(h * h, [1])
        forward_gradients(y, [w], [v])
    printed = str(main).split("  forward:\n", 1)[1]
    assert "  forward:\n" + printed in DOC.read_text()
