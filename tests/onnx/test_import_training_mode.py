"""Models exported in training mode: BatchNormalization with running-statistics outputs normalizes by the batch
and updates its running statistics in place (the variance by PyTorch's unbiased rule for a PyTorch export, by
ONNX's population rule for any other, unless ``bn_running_variance`` says otherwise; five steps against
PyTorch are ``test_import_pytorch_batch_norm``); Dropout with training_mode drops; RandomUniformLike and
RandomNormalLike draw seeded samples."""
from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from gradgen.framework import Executor, Scope
from gradgen.framework.tools.onnx import OnnxImportError, import_onnx
from tests.onnx.torch_models import Imported, assert_near, export, torch

MOMENTUM = 0.1  # PyTorch's: the weight of the new value; the export writes ONNX's 1 - 0.1, the weight of the old


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4, momentum=MOMENTUM)
        self.fc = torch.nn.Linear(4 * 5 * 5, 3)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))


def _training_export(dtype: str):
    torch.manual_seed(0)
    net = ConvNet().to(getattr(torch, dtype)).train()
    with torch.no_grad():
        net.bn.running_mean.uniform_(-1.0, 1.0)
        net.bn.running_var.uniform_(0.5, 2.0)
    x = torch.randn(2, 3, 5, 5, dtype=getattr(torch, dtype))
    model = export(net, (x,), training=torch.onnx.TrainingMode.TRAINING)
    return net, x, model


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batch_norm_exported_in_training_mode_normalizes_by_the_batch_and_updates_running_statistics(dtype):
    net, x, model = _training_export(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        imported = Imported(model)
    ops = [op for op in imported.program.global_block().ops if op.type == "batch_norm"]
    assert len(ops) == 1 and not ops[0].attr("is_test") and ops[0].attr("momentum") == 1.0 - MOMENTUM
    assert ops[0].attr("running_variance") == "unbiased", "PyTorch's rule for a PyTorch export"
    mean, var = ops[0].input("Mean")[0], ops[0].input("Variance")[0]
    assert ops[0].output("MeanOut") == [mean] and ops[0].output("VarianceOut") == [var], "updated in place"
    block = imported.program.global_block()
    assert all(block.var(v).persistable and not block.var(v).trainable for v in (mean, var))
    old_mean, old_var = net.bn.running_mean.clone(), net.bn.running_var.clone()
    seen = {}
    net.bn.register_forward_hook(lambda m, inputs, out: seen.update(x=inputs[0].detach()))
    out = net(x)
    r = np.random.default_rng(3).standard_normal(tuple(out.shape)).astype(dtype)
    (out * torch.from_numpy(r)).sum().backward()
    fetched = imported.run({"input.1": x.numpy()}, r, [imported.out_name] + list(imported.grads))
    assert_near(fetched[0], out.detach().numpy(), dtype, "output")
    for v, grad in zip(imported.trainable, fetched[1:]):
        assert_near(grad, dict(net.named_parameters())[v.name].grad.numpy(), dtype, f"d loss / d {v.name}")
    assert_near(imported.scope[mean], net.bn.running_mean.numpy(), dtype, "running mean after one forward")
    # ONNX defines the running variance's update with the batch's population variance; PyTorch moves it toward
    # the sample (n - 1) variance, so the two differ by n / (n - 1) in the new term. A PyTorch export follows
    # PyTorch: the running variance is the module's (n = 2 * 5 * 5 values per channel).
    unbiased = seen["x"].transpose(0, 1).reshape(4, -1).var(dim=1, unbiased=True)
    want_var = (1.0 - MOMENTUM) * old_var + MOMENTUM * unbiased
    assert_near(want_var.numpy(), net.bn.running_var.numpy(), dtype, "the rule written out is PyTorch's")
    assert_near(imported.scope[var], net.bn.running_var.numpy(), dtype, "running variance after one forward")
    population = seen["x"].transpose(0, 1).reshape(4, -1).var(dim=1, unbiased=False)
    onnx_var = (1.0 - MOMENTUM) * old_var + MOMENTUM * population
    assert np.abs(imported.scope[var] - onnx_var.numpy()).max() > 1e-4, "ONNX's rule would give another value"
    assert not np.allclose(imported.scope[mean], old_mean.numpy()), "the running mean moved"


@pytest.mark.parametrize("producer", ["pytorch", "someone-else"])
@pytest.mark.parametrize("option", ["population", "unbiased"])
def test_an_explicit_bn_running_variance_is_every_training_batch_norms_whoever_produced_the_model(option, producer):
    _, _, model = _training_export("float64")
    proto = onnx.load_from_string(model)
    proto.producer_name = producer
    program, _, _ = import_onnx(proto, bn_running_variance=option)
    assert [op.attr("running_variance") for op in program.global_block().ops if op.type == "batch_norm"] == [option]


@pytest.mark.parametrize("producer, rule", [("pytorch", "unbiased"), ("PyTorch", "unbiased"), ("someone-else",
                                            "population"), ("", "population"), ("gradgen", "population")])
def test_left_unset_the_rule_is_pytorchs_for_a_pytorch_export_and_onnxs_for_any_other(producer, rule):
    _, _, model = _training_export("float64")
    proto = onnx.load_from_string(model)
    proto.producer_name = producer
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        program, _, _ = import_onnx(proto)
    assert [op.attr("running_variance") for op in program.global_block().ops if op.type == "batch_norm"] == [rule]


def test_a_bn_running_variance_that_is_neither_estimator_is_refused():
    _, _, model = _training_export("float64")
    with pytest.raises(OnnxImportError, match="bn_running_variance must be 'population' or 'unbiased', got 'sample'"):
        import_onnx(model, bn_running_variance="sample")


@pytest.mark.parametrize("flag,want", [([], "unbiased"), (["--bn-running-variance", "population"], "population")])
def test_the_cli_flag_chooses_the_estimator(tmp_path, flag, want):
    from gradgen.framework.tools.cli import main as cli
    from gradgen.program import Program

    _, _, model = _training_export("float32")
    (tmp_path / "m.onnx").write_bytes(model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cli(["import-onnx", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "p.json"), *flag]) == 0
    assert not caught, [str(w.message) for w in caught]
    program = Program.load(tmp_path / "p.json")
    assert [op.attr("running_variance") for op in program.global_block().ops if op.type == "batch_norm"] == [want]


def _dropout_model(training, ratio=0.25, mode_is_input=False):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [50, 40])
    outs = [helper.make_tensor_value_info(n, t, [50, 40]) for n, t in (("y", TensorProto.FLOAT),
                                                                       ("mask", TensorProto.BOOL))]
    nodes = [helper.make_node("Constant", [], ["ratio"], value=helper.make_tensor("r", TensorProto.FLOAT, [], [ratio]))]
    inputs = [x]
    if mode_is_input:
        inputs.append(helper.make_tensor_value_info("mode", TensorProto.BOOL, []))
    else:
        nodes.append(helper.make_node("Constant", [], ["mode"],
                                      value=helper.make_tensor("m", TensorProto.BOOL, [], [training])))
    nodes.append(helper.make_node("Dropout", ["x", "ratio", "mode"], ["y", "mask"], name="drop", seed=7))
    graph = helper.make_graph(nodes, "g", inputs, outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run_dropout(model, x):
    program, params, outputs = import_onnx(model)
    return program, Executor().run(program, feed={"x": x}, fetch_list=[outputs["y"], outputs["mask"]], scope=Scope())


def test_dropout_in_training_mode_drops_with_the_ratio_input_and_its_mask_says_where():
    x = np.random.default_rng(0).uniform(1.0, 2.0, (50, 40)).astype(np.float32)
    program, (y, mask) = _run_dropout(_dropout_model(True), x)
    (op,) = [op for op in program.global_block().ops if op.type == "dropout"]
    assert op.attr("p") == 0.25 and not op.attr("is_test") and op.attr("seed") == 7
    assert mask.dtype == np.bool_ and 0.2 < 1.0 - mask.mean() < 0.3
    np.testing.assert_array_equal(y == 0, ~mask)
    np.testing.assert_allclose(y[mask], x[mask] / 0.75, rtol=1e-6)


def test_dropout_in_inference_mode_is_the_identity():
    x = np.random.default_rng(0).standard_normal((50, 40)).astype(np.float32)
    program, (y, mask) = _run_dropout(_dropout_model(False), x)
    assert "dropout" not in [op.type for op in program.global_block().ops]
    np.testing.assert_array_equal(y, x)
    assert mask.all()


@pytest.mark.parametrize("model,message", [
    (_dropout_model(True, mode_is_input=True), "node #1 'drop' (Dropout): input 2 ('mode') must be a constant"),
    (_dropout_model(True, ratio=1.0), "node #2 'drop' (Dropout): ratio 1.0"),
], ids=["mode-at-run-time", "ratio-one"])
def test_dropout_that_cannot_be_imported_names_the_node(model, message):
    with pytest.raises(OnnxImportError, match=message.replace("(", r"\(").replace(")", r"\)")):
        import_onnx(model)


def _random_like_model(op_type, **attrs):
    x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, [200, 50])
    y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)
    graph = helper.make_graph([helper.make_node(op_type, ["x"], ["r"], name="draw", **attrs),
                               helper.make_node("Add", ["x", "r"], ["y"])], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("op_type,attrs,gradgen_type,moments", [
    ("RandomUniformLike", {"low": 2.0, "high": 4.0, "seed": 3.0}, "uniform_random", (3.0, (2.0 / np.sqrt(12)))),
    ("RandomNormalLike", {"mean": -1.0, "scale": 0.5, "seed": 3.0}, "gaussian_random", (-1.0, 0.5)),
], ids=["uniform", "normal"])
def test_random_like_nodes_draw_seeded_samples_of_the_input_shape_and_dtype(op_type, attrs, gradgen_type, moments):
    model = _random_like_model(op_type, **attrs)
    draws = []
    for _ in range(2):  # two imports of one model draw the same samples: the seed is the model's
        program, params, outputs = import_onnx(model)
        (op,) = [op for op in program.global_block().ops if op.type == gradgen_type]
        assert op.attr("shape") == [200, 50] and op.attr("dtype") == "float64" and op.attr("seed") == 3
        (y,) = Executor().run(program, feed={"x": np.zeros((200, 50))}, fetch_list=list(outputs.values()),
                              scope=Scope())
        draws.append(y)
    np.testing.assert_array_equal(draws[0], draws[1])
    assert abs(draws[0].mean() - moments[0]) < 0.02 and abs(draws[0].std() - moments[1]) < 0.02
    if op_type == "RandomUniformLike":
        assert draws[0].min() >= 2.0 and draws[0].max() < 4.0


def test_random_like_of_a_shape_known_only_at_run_time_is_an_error_naming_the_node():
    model = _random_like_model("RandomUniformLike")
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    with pytest.raises(OnnxImportError, match=r"node #0 'draw' \(RandomUniformLike\): an input of shape \[-1, 50\]"):
        import_onnx(model)


def test_a_float32_dropout_ratio_is_the_decimal_written_so_a_float64_model_scales_by_exactly_one_over_keep():
    """PyTorch writes the ratio as float32 in a float64 model: 0.3 is 0.30000001192 in float32, which would scale
    the kept values of a float64 model by 1 / 0.69999998808 (off in the eighth digit)."""
    model = _dropout_model(True, ratio=0.3)
    for v in [*model.graph.input, *model.graph.output[:1]]:
        v.type.tensor_type.elem_type = TensorProto.DOUBLE
    x = np.random.default_rng(0).uniform(1.0, 2.0, (50, 40))
    program, (y, mask) = _run_dropout(model, x)
    (op,) = [op for op in program.global_block().ops if op.type == "dropout"]
    assert op.attr("p") == 0.3
    assert y.dtype == np.float64 and 0.2 < 1.0 - mask.mean() < 0.4
    np.testing.assert_allclose(y[mask], x[mask] / 0.7, rtol=1e-15)
