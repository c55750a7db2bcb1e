"""Whole programs through ONNX: the built-in examples (inference and one full training step), control flow,
the one error that lists every unexportable op, and the ``gradgen export-onnx`` command."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, gradients, optimizer
from gradgen.framework.tools.examples import EXAMPLES
from gradgen.program import Program, layers, program_guard
from tests.onnx.runtime import assert_close, require, run_ort


def _export():
    require("onnx")
    from gradgen.framework import export_onnx

    return export_onnx


def trained_example(name: str, train: bool):
    """An example with its startup run; with ``train``, its backward and optimizer ops appended."""
    ex = EXAMPLES[name]()
    if train:
        with program_guard(ex.main, ex.startup):
            ex.make_optimizer().minimize(ex.loss)
    scope = Scope()
    Executor().run(ex.startup, scope=scope)
    return ex, scope


@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_examples_run_in_onnx_runtime_as_in_the_executor(name, train):
    export_onnx = _export()
    ex, scope = trained_example(name, train)
    params = {k: np.array(scope[k]) for k in scope}
    model = export_onnx(ex.main, params=params, fetch_list=[ex.loss])
    got = run_ort(model, ex.feed)
    (loss,) = Executor().run(ex.main, feed=ex.feed, fetch_list=[ex.loss], scope=scope)
    assert_close(got[ex.loss.name], loss, "loss")
    updated = [n for n in got if n.endswith("@NEW")]
    if train:  # every parameter and optimizer state comes out updated, equal to the executor's step
        assert {n[:-4] for n in updated} >= {p.name for p in ex.main.global_block().all_parameters()}
    else:
        assert updated == []
    for n in updated:
        assert_close(got[n], scope[n[:-4]], n)


OPTIMIZERS = {
    "adam": lambda: optimizer.Adam(0.05), "adamw": lambda: optimizer.AdamW(0.05, weight_decay=0.2),
    "lamb": lambda: optimizer.Lamb(0.05, lamb_weight_decay=0.1),
    "rmsprop": lambda: optimizer.RMSProp(0.05, momentum=0.9, centered=True),
    "rmsprop_plain": lambda: optimizer.RMSProp(0.05), "adagrad": lambda: optimizer.Adagrad(0.05)}


def optimizer_program(name: str, dtype: str):
    """A two-layer MLP trained by optimizer ``name``; (main, startup, loss, feed)."""
    rng = np.random.default_rng(1)
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x, y = layers.data("x", [-1, 3], dtype), layers.data("y", [-1, 2], dtype)
        h = layers.fc(x, 4, act="tanh")
        loss = layers.mean(layers.square(layers.fc(h, 2) - y))
        OPTIMIZERS[name]().minimize(loss)
    feed = {"x": rng.standard_normal((5, 3)).astype(dtype), "y": rng.standard_normal((5, 2)).astype(dtype)}
    return main, startup, loss, feed


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_a_training_step_with_each_optimizer_runs_in_onnx_runtime_as_in_the_executor(name, dtype):
    """A two-layer MLP's step after two executor steps (so the states are not their initial values):
    every parameter and optimizer state ONNX Runtime computes equals the executor's third step."""
    export_onnx = _export()
    main, startup, loss, feed = optimizer_program(name, dtype)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    for _ in range(2):
        exe.run(main, feed=feed, scope=scope)
    got = run_ort(export_onnx(main, params={k: np.array(scope[k]) for k in scope}, fetch_list=[loss]), feed)
    exe.run(main, feed=feed, scope=scope)
    updated = {n[:-4] for n in got if n.endswith("@NEW")}
    assert updated >= {p.name for p in main.global_block().all_parameters()} and len(updated) > 4
    for n in updated:
        assert got[n + "@NEW"].dtype == np.dtype(dtype)
        assert_close(got[n + "@NEW"], scope[n], n)


def _loop_program():
    main = Program()
    with program_guard(main, Program()):
        n = layers.data("n", [], "int64")
        h0 = layers.data("h0", [2, 3], "float64")
        w = layers.data("w", [3, 3], "float64")
        one = layers.fill_constant([], "int64", 1)
        _, h = layers.while_loop(lambda t, h: layers.less_than(t, n),
                                 lambda t, h: [t + one, layers.tanh(layers.matmul(h, w))],
                                 [layers.fill_constant([], "int64", 0), h0])
        positive = layers.greater_than(layers.reduce_sum(h), layers.fill_constant([], "float64", 0.0))
        y = layers.cond(positive, lambda: layers.reduce_sum(h), lambda: layers.reduce_sum(layers.square(h)))
        dw, dh0 = gradients(y, [w, h0])
    return main, [y, dw, dh0]


@pytest.mark.parametrize("steps", [0, 1, 4])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_while_and_cond_and_their_gradients_become_loop_and_if(steps, sign):
    export_onnx = _export()
    main, fetch = _loop_program()
    rng = np.random.default_rng(steps)
    feed = {"n": np.array(steps, np.int64), "h0": sign * np.abs(rng.standard_normal((2, 3))),
            "w": np.abs(rng.standard_normal((3, 3))) * 0.5}
    want = Executor().run(main, feed=feed, fetch_list=fetch, scope=Scope())
    model = export_onnx(main, fetch_list=fetch)
    assert {n.op_type for n in model.graph.node} >= {"Loop", "If"}
    got = run_ort(model, feed)
    for var, w in zip(fetch, want):
        assert_close(got[var.name], w, var.name)


def test_unexportable_ops_are_listed_in_one_error():
    export_onnx = _export()
    from gradgen.framework.tools.onnx import OnnxExportError

    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 3, -1, 4], "float64")
        y = layers.dropout(layers.relu(x), 0.5)
        z = layers.pool2d(y, 2, "max")
    with pytest.raises(OnnxExportError) as info:
        export_onnx(main, fetch_list=[z])
    message = str(info.value)
    assert "2 op(s) cannot be exported" in message
    assert "op #1 (dropout): training-mode dropout" in message
    assert "op #2 (pool2d): X must have known spatial sizes" in message


def test_parameters_become_initializers_and_missing_ones_inputs():
    export_onnx = _export()
    ex, scope = trained_example("mlp", False)
    model = export_onnx(ex.main, params={"w1": scope["w1"]}, fetch_list=[ex.loss])
    assert [t.name for t in model.graph.initializer] == ["w1"]
    assert sorted(i.name for i in model.graph.input) == ["w2", "x", "y"]
    assert [o.name for o in model.graph.output] == [ex.loss.name]
    assert model.opset_import[0].version == 17


def test_only_the_ops_the_fetches_need_are_exported():
    export_onnx = _export()
    ex, scope = trained_example("mlp", True)
    model = export_onnx(ex.main, params={k: scope[k] for k in scope}, fetch_list=["y_pred"], include_updates=False)
    assert sorted(i.name for i in model.graph.input) == ["x"]  # the labels are not needed for a prediction
    assert {n.op_type for n in model.graph.node} == {"MatMul", "Relu"}


def test_bad_parameter_values_are_named():
    export_onnx = _export()
    from gradgen.framework.tools.onnx import OnnxExportError

    ex, _ = trained_example("mlp", False)
    with pytest.raises(OnnxExportError, match=r"param 'w1' is float32\[3\]"):
        export_onnx(ex.main, params={"w1": np.zeros(3, np.float32)}, fetch_list=[ex.loss])


def test_cli_exports_a_program_file(tmp_path, capsys):
    require("onnx")
    import onnx

    from gradgen.framework.io import save_params
    from gradgen.framework.tools.cli import main as cli

    ex, scope = trained_example("mlp", True)
    ex.main.save(tmp_path / "main.json")
    save_params(tmp_path / "params.npz", ex.main, scope)
    out = tmp_path / "model.onnx"
    assert cli(["export-onnx", str(tmp_path / "main.json"), "--params", str(tmp_path / "params.npz"),
                "--fetch", "loss", "-o", str(out)]) == 0
    assert "opset 17" in capsys.readouterr().out
    model = onnx.load(str(out))
    got = run_ort(model, ex.feed)
    (loss,) = Executor().run(ex.main, feed=ex.feed, fetch_list=[ex.loss], scope=scope)
    assert_close(got["loss"], loss, "loss")
    assert_close(got["w1@NEW"], scope["w1"], "w1")


@pytest.mark.parametrize("batch", [1, 5])
def test_unknown_dims_stay_unknown_so_any_batch_runs(batch):
    export_onnx = _export()
    ex, scope = trained_example("cnn", True)
    model = export_onnx(ex.main, params={k: np.array(scope[k]) for k in scope}, fetch_list=[ex.loss])
    image = model.graph.input[0]
    assert image.name == "image" and not image.type.tensor_type.shape.dim[0].HasField("dim_value")
    feed = {k: v[:batch] for k, v in ex.feed.items()}
    got = run_ort(model, feed)
    (loss,) = Executor().run(ex.main, feed=feed, fetch_list=[ex.loss], scope=scope)
    assert_close(got["loss"], loss, "loss")
    assert_close(got["conv.w@NEW"], scope["conv.w"], "conv.w")


def broadcast_gradient_program():
    """The gradients of sum((x * y)^2) for x, y of [-1, 3]: y broadcasts when its rows turn out to be 1; (main,
    [dx, dy])."""
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 3], "float64")
        y = layers.data("y", [-1, 3], "float64")
        loss = layers.reduce_sum(layers.square(x * y))
        dx, dy = gradients(loss, [x, y])
    return main, [dx, dy]


@pytest.mark.parametrize("rows", [1, 4])
def test_a_gradient_over_unknown_broadcast_dims_sums_them_when_they_turn_out_to_be_1(rows):
    export_onnx = _export()
    from gradgen.framework import import_onnx

    main, (dx, dy) = broadcast_gradient_program()
    assert "reduce_as" in {op.type for op in main.global_block().ops}
    rng = np.random.default_rng(rows)
    feed = {"x": rng.standard_normal((4, 3)), "y": rng.standard_normal((rows, 3))}  # y broadcast when rows == 1
    want = Executor().run(main, feed=feed, fetch_list=[dx, dy], scope=Scope())
    assert want[1].shape == (rows, 3)
    model = export_onnx(main, fetch_list=[dx, dy])
    assert "If" in {n.op_type for n in model.graph.node}
    got = run_ort(model, feed)
    assert_close(got[dx.name], want[0], "dx")
    assert_close(got[dy.name], want[1], "dy")
    program, _, outputs = import_onnx(model)  # the If comes back as reduce_as
    assert "reduce_as" in {op.type for op in program.global_block().ops}
    back = Executor().run(program, feed=feed, fetch_list=[outputs[dx.name], outputs[dy.name]], scope=Scope())
    assert_close(back[0], want[0], "dx after the round trip")
    assert_close(back[1], want[1], "dy after the round trip")


def test_a_training_program_outputs_its_loss_by_default():
    """The loss is read by its gradient's seed, so "written and never read" alone would leave it out."""
    export_onnx = _export()
    ex, scope = trained_example("mlp", True)
    model = export_onnx(ex.main, params={k: scope[k] for k in scope})
    names = [o.name for o in model.graph.output]
    assert names[0] == "loss"
    got = run_ort(model, ex.feed)
    (loss,) = Executor().run(ex.main, feed=ex.feed, fetch_list=[ex.loss], scope=scope)
    assert_close(got["loss"], loss, "loss")


def _batch_norm_cnn():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        image = layers.data("image", [-1, 1, 4, 4], "float64")
        label = layers.data("label", [-1, 1], "int64")
        h = layers.batch_norm(layers.conv2d(image, 2, 3, padding=1), name="bn")
        logits = layers.fc(layers.reshape(layers.relu(h), [-1, 32]), 2, name="out")
        loss = layers.mean(layers.softmax_with_cross_entropy(logits, label), name="loss")
        optimizer.SGD(0.1).minimize(loss)
    return main, startup, logits


def test_a_pruned_inference_program_exports_no_running_statistics_update():
    """In inference mode batch norm writes its running mean and variance back unchanged: not an update."""
    export_onnx = _export()
    from gradgen.framework.passes.prune import prune

    main, startup, logits = _batch_norm_cnn()
    scope = Scope()
    Executor().run(startup, scope=scope)
    infer = prune(main, [logits.name], ["image"], for_test=True)
    model = export_onnx(infer, params={k: np.array(scope[k]) for k in scope})
    assert [o.name for o in model.graph.output] == [logits.name]
    image = np.random.default_rng(0).standard_normal((3, 1, 4, 4))
    got = run_ort(model, {"image": image})
    (want,) = Executor().run(infer, feed={"image": image}, fetch_list=[logits.name], scope=scope)
    assert_close(got[logits.name], want, logits.name)


def test_a_training_batch_norm_still_exports_its_running_statistics():
    export_onnx = _export()
    main, startup, _ = _batch_norm_cnn()
    scope = Scope()
    Executor().run(startup, scope=scope)
    model = export_onnx(main, params={k: np.array(scope[k]) for k in scope})
    names = [o.name for o in model.graph.output]
    assert names[0] == "loss"
    assert {"bn.mean@NEW", "bn.variance@NEW"} <= set(names)
