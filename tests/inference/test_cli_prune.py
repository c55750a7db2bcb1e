"""``gradgen prune`` and ``gradgen run`` fetching a prediction from a training program (in-process)."""
from __future__ import annotations

import numpy as np

from gradgen.framework.io import save_params
from gradgen.framework.tools.cli import main as gradgen

from .models import reference_prediction, trained_regression


def _files(tmp_path):
    main, startup, scope, v = trained_regression()
    main.save(tmp_path / "main.json")
    save_params(tmp_path / "params.npz", main, scope)
    np.save(tmp_path / "x.npy", v["feed"]["x"])
    return scope, v


def test_run_fetching_only_the_prediction_needs_no_labels(tmp_path, capsys):
    scope, v = _files(tmp_path)
    code = gradgen(["run", str(tmp_path / "main.json"), "--params", str(tmp_path / "params.npz"),
                    "--feed", f"x={tmp_path / 'x.npy'}", "--fetch", v["pred"].name, "--save-params",
                    str(tmp_path / "after.npz")])
    assert code == 1 and "needs input y" in capsys.readouterr().err  # saving the params means training: labels needed
    code = gradgen(["run", str(tmp_path / "main.json"), "--params", str(tmp_path / "params.npz"),
                    "--feed", f"x={tmp_path / 'x.npy'}", "--fetch", v["pred"].name])
    out = capsys.readouterr().out
    assert code == 0, out
    # main.json has dropout in training mode (a seeded mask): the value is checked on the pruned program below
    assert out.startswith(f"{v['pred'].name}: float64[5, 1]")


def test_prune_writes_an_inference_program_and_only_the_parameters_it_reads(tmp_path, capsys):
    scope, v = _files(tmp_path)
    code = gradgen(["prune", str(tmp_path / "main.json"), "--fetch", v["pred"].name, "--feed", "x",
                    "-o", str(tmp_path / "infer.json"), "--params", str(tmp_path / "params.npz")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "kept 9 of" in out and "feeds: x;" in out and f"wrote {tmp_path / 'infer.npz'} (8 vars)" in out
    with np.load(tmp_path / "infer.npz") as archive:
        assert "learning_rate_float64_0" not in archive.files and len(archive.files) == 8
    code = gradgen(["run", str(tmp_path / "infer.json"), "--params", str(tmp_path / "infer.npz"),
                    "--feed", f"x={tmp_path / 'x.npy'}", "--fetch", v["pred"].name])
    out = capsys.readouterr().out
    assert code == 0
    expected = reference_prediction(scope, v["feed"]["x"])
    assert f"{expected[0, 0]:.6f}"[:6] in out


def test_prune_errors(tmp_path, capsys):
    _, v = _files(tmp_path)
    assert gradgen(["prune", str(tmp_path / "main.json"), "--fetch", "fc_0.w_0@GRAD", "-o",
                    str(tmp_path / "g.json")]) == 1
    assert "--keep-training-ops" in capsys.readouterr().err
    assert gradgen(["prune", str(tmp_path / "main.json"), "--fetch", "fc_0.w_0@GRAD", "-o",
                    str(tmp_path / "g.json"), "--keep-training-ops"]) == 0
    assert gradgen(["prune", str(tmp_path / "main.json"), "--fetch", v["loss"].name, "--feed", "x", "-o",
                    str(tmp_path / "l.json")]) == 1
    assert "needs y" in capsys.readouterr().err
