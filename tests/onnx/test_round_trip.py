"""gradgen -> ONNX -> gradgen: the imported program computes what the original computes."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, append_backward
from gradgen.framework.tools.examples import EXAMPLES
from gradgen.program import program_guard
from tests.onnx.runtime import assert_close, require
from tests.onnx.test_export_programs import trained_example

ROUND_TRIPS = [(name, train) for name in sorted(EXAMPLES) for train in (False, True)]


def _tools():
    require("onnx")
    from gradgen.framework import export_onnx, import_onnx

    return export_onnx, import_onnx


def _scope(params) -> Scope:
    scope = Scope()
    for name, value in params.items():
        scope.set(name, value)
    return scope


@pytest.mark.parametrize("name,train", ROUND_TRIPS,
                         ids=[f"{n}-{'training' if t else 'inference'}" for n, t in ROUND_TRIPS])
def test_examples_survive_a_round_trip(name, train):
    export_onnx, import_onnx = _tools()
    ex, scope = trained_example(name, train)
    model = export_onnx(ex.main, params={k: np.array(scope[k]) for k in scope}, fetch_list=[ex.loss])
    program, params, outputs = import_onnx(model)
    names = list(outputs)
    got = Executor().run(program, feed=ex.feed, fetch_list=[outputs[n] for n in names], scope=_scope(params))
    (loss,) = Executor().run(ex.main, feed=ex.feed, fetch_list=[ex.loss], scope=scope)
    assert names[0] == ex.loss.name
    assert_close(got[0], loss, "loss")
    assert len(names) > 1 if train else len(names) == 1
    for n, value in zip(names[1:], got[1:]):  # the updated parameters and optimizer state
        assert_close(value, scope[n[:-4]], n)


def test_an_imported_model_can_be_fine_tuned():
    export_onnx, import_onnx = _tools()
    ex, scope = trained_example("mlp", False)
    model = export_onnx(ex.main, params={k: np.array(scope[k]) for k in scope}, fetch_list=[ex.loss])
    program, params, outputs = import_onnx(model)
    block = program.global_block()
    assert sorted(v.name for v in block.all_parameters()) == ["w1", "w2"]
    assert all(block.var(n).trainable and block.var(n).persistable for n in ("w1", "w2"))
    loss = block.var(outputs[ex.loss.name])
    with program_guard(program):
        grads = append_backward(loss)
    fetched = Executor().run(program, feed=ex.feed, fetch_list=[g for _, g in grads], scope=_scope(params))
    with program_guard(ex.main, ex.startup):
        want_grads = append_backward(ex.loss)
    want = Executor().run(ex.main, feed=ex.feed, fetch_list=[g for _, g in want_grads], scope=scope)
    for g, w in zip(fetched, want):
        assert_close(g, w, "gradient")


def test_unsupported_nodes_are_listed_in_one_error():
    require("onnx")
    from onnx import TensorProto, helper

    from gradgen.framework import import_onnx
    from gradgen.framework.tools.onnx import OnnxImportError

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="ok"), helper.make_node("Celu", ["a"], ["b"], name="c1"),
             helper.make_node("Shrink", ["b"], ["y"], name="h1")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(OnnxImportError) as info:
        import_onnx(model)
    message = str(info.value)
    assert "2 node(s) cannot be imported" in message
    assert "node #1 'c1' (Celu)" in message and "node #2 'h1' (Shrink)" in message


def test_cli_imports_a_model(tmp_path, capsys):
    export_onnx, _ = _tools()
    from gradgen.framework.io import load_params
    from gradgen.framework.tools.cli import main as cli
    from gradgen.program import Program

    ex, scope = trained_example("mlp", False)
    export_onnx(ex.main, tmp_path / "m.onnx", params={k: np.array(scope[k]) for k in scope}, fetch_list=[ex.loss])
    assert cli(["import-onnx", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "p.json")]) == 0
    assert "p.params.npz (2 parameters)" in capsys.readouterr().out
    program = Program.load(tmp_path / "p.json")
    loaded = Scope()
    load_params(tmp_path / "p.params.npz", program, loaded)
    (got,) = Executor().run(program, feed=ex.feed, fetch_list=["loss"], scope=loaded)
    (want,) = Executor().run(ex.main, feed=ex.feed, fetch_list=[ex.loss], scope=scope)
    assert_close(got, want, "loss")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_layer_norm_exports_as_layer_normalization_and_imports_back_as_one_op(dtype):
    export_onnx, import_onnx = _tools()
    from gradgen.program import Program, layers

    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 3, 4], dtype)
        y = layers.layer_norm(x, begin_norm_axis=1, name="ln")
        z = layers.layer_norm(y, shift=False)
    rng = np.random.default_rng(0)
    params = {"ln.scale": rng.standard_normal((3, 4)).astype(dtype), "ln.bias": rng.standard_normal((3, 4))
              .astype(dtype), "layer_norm_0.w_0": rng.standard_normal(4).astype(dtype)}
    model = export_onnx(main, params=params, fetch_list=[z])
    assert [n.op_type for n in model.graph.node].count("LayerNormalization") == 2
    program, imported, outputs = import_onnx(model)
    assert [op.type for op in program.global_block().ops].count("layer_norm") == 2
    feed = {"x": rng.standard_normal((5, 3, 4)).astype(dtype) * 3}
    (got,) = Executor().run(program, feed=feed, fetch_list=[outputs[z.name]], scope=_scope(imported))
    (want,) = Executor().run(main, feed=feed, fetch_list=[z], scope=_scope(params))
    assert_close(got, want, "layer_norm")


def test_layer_normalization_with_a_broadcast_scale_and_its_statistics_imports():
    require("onnx")
    from onnx import TensorProto, helper

    from gradgen.framework import import_onnx

    x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2, 3, 4])
    scale = helper.make_tensor_value_info("s", TensorProto.DOUBLE, [1])
    outs = [helper.make_tensor_value_info(n, TensorProto.DOUBLE, None) for n in ("y", "mean", "inv")]
    node = helper.make_node("LayerNormalization", ["x", "s"], ["y", "mean", "inv"], axis=1, epsilon=1e-3)
    model = helper.make_model(helper.make_graph([node], "g", [x, scale], outs),
                              opset_imports=[helper.make_opsetid("", 17)])
    program, params, names = import_onnx(model)
    xs, s = np.random.default_rng(1).standard_normal((2, 3, 4)), np.array([1.5])
    got = Executor().run(program, feed={"x": xs, "s": s}, fetch_list=[names[n] for n in ("y", "mean", "inv")],
                         scope=_scope(params))
    mean, var = xs.mean(axis=(1, 2), keepdims=True), xs.var(axis=(1, 2), keepdims=True)
    # ONNX stores float attrs as float32; the import reads back the decimal written (1e-3), as for BatchNormalization
    assert [op.attr("epsilon") for op in program.global_block().ops if op.type == "layer_norm"] == [1e-3]
    inv = 1 / np.sqrt(var + 1e-3)
    for g, w in zip(got, [(xs - mean) * inv * s, mean, inv]):
        np.testing.assert_allclose(g, w, rtol=1e-12)


def test_a_redrawing_random_op_exports_as_onnxs_own_seeded_op_and_imports_back_redrawing():
    """``redraw`` samples change every run: exported as RandomUniform/RandomNormal (ONNX Runtime's stream, which
    advances per run), not as one drawn constant; a RandomUniformLike imported redraws."""
    ort = require("onnxruntime")
    from gradgen.framework import export_onnx, import_onnx
    from gradgen.program import Program, layers

    main = Program()
    with program_guard(main, Program()):
        u = layers.uniform_random([50, 4], "float32", min=2.0, max=3.0, seed=5, redraw=True)
        n = layers.gaussian_random([50, 4], mean=1.0, std=0.5, seed=6, dtype="float64", redraw=True)
        fixed = layers.uniform_random([2, 2], "float32", seed=7)
    model = export_onnx(main, fetch_list=[u, n, fixed])
    kinds = [node.op_type for node in model.graph.node]
    assert "RandomUniform" in kinds and "RandomNormal" in kinds
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    first, second = session.run(None, {}), session.run(None, {})
    assert first[0].dtype == np.float32 and first[1].dtype == np.float64
    assert 2.0 <= first[0].min() and first[0].max() < 3.0 and abs(first[1].mean() - 1.0) < 0.2
    assert not np.array_equal(first[0], second[0]) and not np.array_equal(first[1], second[1])
    np.testing.assert_array_equal(first[2], second[2])  # no redraw: one constant
    program, params, outputs = import_onnx(model)
    exe, scope = Executor(), _scope(params)
    a, b = (exe.run(program, fetch_list=[outputs[u.name]], scope=scope)[0] for _ in range(2))
    assert not np.array_equal(a, b)
