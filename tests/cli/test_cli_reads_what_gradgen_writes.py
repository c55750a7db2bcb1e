"""``gradgen run`` reads what gradgen writes: inference model folders, ``import-onnx``'s program with the
parameters it wrote beside it, and ``.npz`` feeds; a missing parameter gets command-line advice (issue 34, item 3)."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, save_inference_model
from gradgen.framework.tools.cli import main as cli
from gradgen.program import Program, layers, program_guard
from tests.extras import require


@pytest.fixture
def classifier(tmp_path):
    """A float32 classifier: its training program, startup, a trained-less scope and an input batch on disk."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 4], "float32")
        label = layers.data("label", [-1, 1], "int64")
        logits = layers.fc(x, 3)
        loss = layers.reduce_mean(layers.softmax_with_cross_entropy(logits, label))
    scope = Scope()
    Executor().run(startup, scope=scope)
    xs = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", xs)
    main.save(tmp_path / "main.json")
    startup.save(tmp_path / "startup.json")
    (want,) = Executor().run(main, feed={"x": xs, "label": np.zeros((5, 1), np.int64)}, fetch_list=[logits],
                             scope=scope)
    return main, scope, logits, loss, xs, want


def _error(capsys, argv) -> str:
    assert cli(argv) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("gradgen: error: ") and len(err.splitlines()) == 1, err
    return err


def test_run_and_show_take_an_inference_model_folder_and_its_fetches(tmp_path, classifier, capsys):
    main, scope, logits, _, _, want = classifier
    save_inference_model(tmp_path / "digits_model", ["x"], [logits], main, scope)
    assert cli(["run", str(tmp_path / "digits_model"), "--feed", f"x={tmp_path / 'x.npy'}", "--save",
                str(tmp_path / "out")]) == 0  # no --fetch: the folder names its fetches
    assert capsys.readouterr().out.startswith(f"{logits.name}: float32[5, 3]")
    np.testing.assert_array_equal(np.load(tmp_path / "out" / f"{logits.name}.npy"), want)
    assert cli(["show", str(tmp_path / "digits_model")]) == 0
    printed = capsys.readouterr().out
    assert "fc_0.w_0" in printed and "softmax_with_cross_entropy" not in printed  # the pruned program


def test_a_folder_that_is_no_inference_model_says_so(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    err = _error(capsys, ["show", str(tmp_path / "empty")])
    assert "not an inference model folder (no inference.json)" in err and "save_inference_model" in err


def test_a_missing_parameter_gets_command_line_advice(tmp_path, classifier, capsys):
    _, _, logits, _, _, _ = classifier
    err = _error(capsys, ["run", str(tmp_path / "main.json"), "--feed", f"x={tmp_path / 'x.npy'}",
                          "--fetch", logits.name])
    assert "the program reads fc_0.w_0, fc_0.b_0, with no value given: give --params FILE.npz" in err
    assert "--startup FILE.json" in err and "scope.set" not in err


def test_run_loads_the_parameters_import_onnx_wrote_beside_the_program(tmp_path, classifier, capsys):
    require(None if importlib.util.find_spec("onnx") else "onnx", "pip install -e '.[onnx]'")
    from gradgen.framework import export_onnx

    main, scope, logits, _, _, want = classifier
    export_onnx(main, tmp_path / "m.onnx", params={k: np.array(scope[k]) for k in scope}, fetch_list=[logits])
    assert cli(["import-onnx", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "imported.json")]) == 0
    assert "imported.params.npz (2 parameters)" in capsys.readouterr().out
    assert cli(["run", str(tmp_path / "imported.json"), "--feed", f"x={tmp_path / 'x.npy'}", "--fetch", logits.name,
                "--save", str(tmp_path / "out")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "out" / f"{logits.name}.npy"), want)


def test_import_onnx_says_how_to_run_with_parameters_written_elsewhere(tmp_path, classifier, capsys):
    require(None if importlib.util.find_spec("onnx") else "onnx", "pip install -e '.[onnx]'")
    from gradgen.framework import export_onnx

    main, scope, logits, _, _, _ = classifier
    export_onnx(main, tmp_path / "m.onnx", params={k: np.array(scope[k]) for k in scope}, fetch_list=[logits])
    out = tmp_path / "w.npz"
    assert cli(["import-onnx", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "p.json"), "--params-out",
                str(out)]) == 0
    assert f"run it with --params {out}" in capsys.readouterr().out


def test_feeds_from_an_npz_archive_by_name_alone_or_all_at_once(tmp_path, classifier, capsys):
    _, _, _, loss, xs, _ = classifier
    labels = np.array([[0], [1], [2], [1], [0]], np.int64)
    np.save(tmp_path / "label.npy", labels)
    np.savez(tmp_path / "batch.npz", x=xs, label=labels)
    np.savez(tmp_path / "only.npz", xs)
    common = [str(tmp_path / "main.json"), "--startup", str(tmp_path / "startup.json"), "--fetch", loss.name]
    shown = []
    for feeds in (["--feed", f"x={tmp_path / 'x.npy'}", "--feed", f"label={tmp_path / 'label.npy'}"],
                  ["--feed", str(tmp_path / "batch.npz")],
                  ["--feed", f"x={tmp_path / 'batch.npz'}", "--feed", f"label={tmp_path / 'batch.npz'}"],
                  ["--feed", f"x={tmp_path / 'only.npz'}", "--feed", f"label={tmp_path / 'label.npy'}"]):
        assert cli(["run", *common, *feeds]) == 0
        shown.append(capsys.readouterr().out)
    assert shown[0].startswith(f"{loss.name}: float32[]") and shown.count(shown[0]) == 4, shown


@pytest.mark.parametrize("feeds,message", [
    (["--feed", "{batch}", "--feed", "x={x}"], "--feed: 'x' is given twice ({batch} and x={x})"),
    (["--feed", "x={pair}"], "the archive holds no array 'x' (it holds a, b); give --feed {pair} to feed each"),
    (["--feed", "{x}"], "a .npy file holds one unnamed array; give NAME={x}"),
])
def test_npz_feed_mistakes_are_one_line(tmp_path, classifier, capsys, feeds, message):
    _, _, _, loss, xs, _ = classifier
    paths = {"batch": tmp_path / "batch.npz", "pair": tmp_path / "pair.npz", "x": tmp_path / "x.npy"}
    np.savez(paths["batch"], x=xs)
    np.savez(paths["pair"], a=xs, b=xs)
    argv = ["run", str(tmp_path / "main.json"), "--fetch", loss.name, *[f.format(**paths) for f in feeds]]
    assert message.format(**paths) in _error(capsys, argv)
