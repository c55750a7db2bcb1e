"""save_inference_model / load_inference_model, parameters into clone(for_test), and scope_guard."""
from __future__ import annotations

import json

import numpy as np
import pytest

from gradgen.framework import (Executor, Scope, global_scope, load_inference_model, save_inference_model,
                               scope_guard)
from gradgen.framework.errors import ExecutionError
from gradgen.framework.inference import MANIFEST, InferenceModelError
from gradgen.framework.io import load_params, save_params
from gradgen.framework.passes.prune import PruneError
from gradgen.program import Program, layers, program_guard

from .models import reference_prediction, trained_regression


def test_round_trip_predicts_what_the_trained_model_predicts(tmp_path):
    main, _, scope, v = trained_regression(steps=3)
    written = save_inference_model(tmp_path / "m", ["x"], [v["pred"]], main, scope)
    assert written == ["fc_0.w_0", "fc_0.b_0", "batch_norm_0.scale", "batch_norm_0.bias", "batch_norm_0.mean",
                       "batch_norm_0.variance", "fc_1.w_0", "fc_1.b_0"]  # no learning rate, no gradients
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["inference.json", "model.json", "params.npz"]
    fresh = Scope()
    program, feeds, fetches = load_inference_model(tmp_path / "m", scope=fresh)
    assert feeds == ["x"] and [f.name for f in fetches] == [v["pred"].name]
    assert {op.role for op in program.global_block().ops} == {"forward"}
    xs = np.random.default_rng(2).standard_normal((6, 3))
    (got,) = Executor().run(program, feed={feeds[0]: xs}, fetch_list=fetches, scope=fresh)
    np.testing.assert_allclose(got, reference_prediction(scope, xs), rtol=1e-12)


def test_paddle_call_order_with_an_executor_and_scope_guard(tmp_path):
    main, startup, _, v = trained_regression()
    exe = Executor()
    training = Scope()
    with scope_guard(training):
        exe.run(startup)
        save_inference_model(str(tmp_path / "m"), ["x"], [v["pred"]], exe, main)
    inference = Scope()
    with scope_guard(inference):
        assert global_scope() is inference
        program, feeds, fetches = load_inference_model(str(tmp_path / "m"), exe)
        xs = np.ones((2, 3))
        (got,) = exe.run(program, feed={feeds[0]: xs}, fetch_list=fetches)
    assert global_scope() is not inference and "fc_0.w_0" in inference and "fc_0.w_0" not in global_scope()
    np.testing.assert_allclose(got, reference_prediction(training, xs), rtol=1e-12)


def test_a_model_needing_the_labels_is_refused(tmp_path):
    main, _, scope, v = trained_regression()
    with pytest.raises(PruneError, match="needs y"):
        save_inference_model(tmp_path / "m", ["x"], [v["loss"]], main, scope)
    assert not (tmp_path / "m").exists()


def test_missing_parameter_values_are_refused(tmp_path):
    main, _, _, v = trained_regression()
    with pytest.raises(InferenceModelError, match="holds no value for 'fc_0.w_0'"):
        save_inference_model(tmp_path / "m", ["x"], [v["pred"]], main, Scope())


@pytest.mark.parametrize("manifest,message", [
    (None, "no inference.json"),
    ("not json", "unreadable"),
    ({"format": "other"}, "not a gradgen-inference-model manifest"),
    ({"format": "gradgen-inference-model", "version": 9, "model": "model.json", "params": None, "feeds": [],
      "fetches": []}, "version 9"),
    ({"format": "gradgen-inference-model", "version": 1, "model": "../x.json", "params": None, "feeds": [],
      "fetches": []}, "a file name inside the folder"),
    ({"format": "gradgen-inference-model", "version": 1, "model": "model.json", "params": "params.npz",
      "feeds": ["x"], "fetches": ["ghost"]}, "names 'ghost'"),
])
def test_bad_folders_are_clear_errors(tmp_path, manifest, message):
    main, _, scope, v = trained_regression()
    save_inference_model(tmp_path / "m", ["x"], [v["pred"]], main, scope)
    path = tmp_path / "m" / MANIFEST
    if manifest is None:
        path.unlink()
    else:
        path.write_text(manifest if isinstance(manifest, str) else json.dumps(manifest))
    with pytest.raises(InferenceModelError, match=message):
        load_inference_model(tmp_path / "m", scope=Scope())


def test_training_parameters_load_into_the_test_clone(tmp_path):
    main, _, scope, v = trained_regression()
    test_program = v["test_program"]
    save_params(tmp_path / "p.npz", main, scope)  # holds learning_rate_float64_0, which the clone lacks
    fresh = Scope()
    loaded = load_params(tmp_path / "p.npz", test_program, fresh)
    assert "learning_rate_float64_0" not in loaded and "fc_0.w_0" in loaded
    (loss,) = Executor().run(test_program, feed=v["feed"], fetch_list=[v["loss"]], scope=fresh)
    pred = reference_prediction(scope, v["feed"]["x"])
    np.testing.assert_allclose(loss, np.mean((pred - v["feed"]["y"]) ** 2), rtol=1e-12)


def test_a_model_without_parameters(tmp_path):
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [None, 2], "float64")
        y = layers.tanh(x)
    assert save_inference_model(tmp_path / "m", ["x"], [y], main, Scope()) == []
    program, feeds, fetches = load_inference_model(tmp_path / "m", scope=Scope())
    (got,) = Executor().run(program, feed={"x": np.ones((1, 2))}, fetch_list=fetches, scope=Scope())
    np.testing.assert_allclose(got, np.tanh(np.ones((1, 2))))


def test_scope_guards_nest_restore_on_errors_and_refuse_non_scopes():
    outer, inner = Scope(), Scope()
    before = global_scope()
    with scope_guard(outer):
        with pytest.raises(RuntimeError):
            with scope_guard(inner):
                assert global_scope() is inner
                raise RuntimeError("boom")
        assert global_scope() is outer
    assert global_scope() is before
    with pytest.raises(ExecutionError, match="scope_guard needs a Scope, got dict"):
        with scope_guard({}):
            pass
