"""float64 data into a float32 program: ``--cast`` converts a feed only when the data keeps its meaning, and the
dtype error on the command line names that option (issue 34, item 4)."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework.tools.cli import main as cli
from gradgen.program import Program, layers, program_guard


@pytest.fixture
def program(tmp_path):
    """A float32 program with an int64 label: the sum of the rows of x picked by the label."""
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 3], "float32")
        label = layers.data("label", [-1, 1], "int64")
        layers.reduce_sum(layers.multiply(x, layers.cast(label, "float32")), name="total")
    main.save(tmp_path / "main.json")
    return tmp_path / "main.json"


def _run(capsys, program, feeds: dict, *more: str) -> tuple[int, str, str]:
    folder = program.parent
    args = []
    for name, value in feeds.items():
        np.save(folder / f"{name}.npy", value)
        args += ["--feed", f"{name}={folder / f'{name}.npy'}"]
    code = cli(["run", str(program), *args, "--fetch", "total", "--save", str(folder / "out"), *more])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_dtype_error_names_cast(program, capsys):
    code, _, err = _run(capsys, program, {"x": np.ones((2, 3)), "label": np.ones((2, 1), np.int64)})
    assert code == 1
    assert ("feed 'x' is float64, but the program declares x: float32[-1, 3]; add --cast to convert it" in err
            and ".astype" not in err), err


def test_cast_feeds_float64_data_and_integral_float_labels(program, capsys):
    xs = np.random.default_rng(0).standard_normal((4, 3))
    labels = np.array([[1.0], [0.0], [2.0], [1.0]])
    code, _, err = _run(capsys, program, {"x": xs, "label": labels}, "--cast")
    assert code == 0, err
    want = np.sum(xs.astype(np.float32) * labels.astype(np.float32), dtype=np.float32)
    np.testing.assert_allclose(np.load(program.parent / "out" / "total.npy"), want, rtol=1e-6)


@pytest.mark.parametrize("feeds,message", [
    ({"x": np.ones((2, 3)), "label": np.array([[1.0], [2.5]])},
     "--cast: feed 'label' cannot become int64 without changing it: 2.5 at [1, 0] would become 2"),
    ({"x": np.array([[1.0, 1e300, 0.0], [0.0, 0.0, 0.0]]), "label": np.ones((2, 1), np.int64)},
     "--cast: feed 'x' cannot become float32 without changing it: 1e+300 at [0, 1] would become inf (out of "
     "float32's range)"),
])
def test_cast_refuses_what_would_change_the_data(program, capsys, feeds, message):
    code, _, err = _run(capsys, program, feeds, "--cast")
    assert code == 1 and message in err, err
