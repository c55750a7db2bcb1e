"""GroupNormalization (opset 18: scale and bias per group; opset 21: per channel) and InstanceNormalization import
and match numpy; malformed conv and norm nodes are refused by name."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope
from tests.onnx.runtime import require


def _model(node, inits: dict, x_shape, opset: int):
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, list(x_shape))
    y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)
    graph = helper.make_graph([node], "g", [x], [y], initializer=[numpy_helper.from_array(v, k) for k, v in
                                                                    inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _run(model, x):
    from gradgen.framework import import_onnx

    program, params, outputs = import_onnx(model)
    scope = Scope()
    for k, v in params.items():
        scope.set(k, v)
    (y,) = Executor().run(program, feed={"x": x}, fetch_list=[outputs["y"]], scope=scope)
    return y


def _normalized(x, groups, eps):
    # an ONNX float attr is stored as float32; the import reads back the decimal the exporter wrote
    g = x.reshape(x.shape[0], groups, -1)
    return ((g - g.mean(2, keepdims=True)) / np.sqrt(g.var(2, keepdims=True) + eps)).reshape(x.shape)


@pytest.mark.parametrize("opset", [18, 21])
@pytest.mark.parametrize("shape", [(2, 6, 5), (1, 6, 2, 3, 2)], ids=str)
def test_group_normalization_scales_per_group_before_opset_21_and_per_channel_after(opset, shape):
    require("onnx")
    from onnx import helper

    rng = np.random.default_rng(0)
    x, per = rng.standard_normal(shape), 3 if opset < 21 else 6
    scale, bias = rng.standard_normal(per), rng.standard_normal(per)
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3, epsilon=1e-3)
    got = _run(_model(node, {"s": scale, "b": bias}, shape, opset), x)
    channel = np.repeat(np.arange(3), 2) if opset < 21 else np.arange(6)  # which scale each channel takes
    along = (-1,) + (1,) * (len(shape) - 2)
    want = _normalized(x, 3, 1e-3) * scale[channel].reshape(along) + bias[channel].reshape(along)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 2, 3, 2, 2)], ids=str)
def test_instance_normalization(shape):
    require("onnx")
    from onnx import helper

    rng = np.random.default_rng(1)
    x, scale, bias = rng.standard_normal(shape), rng.standard_normal(shape[1]), rng.standard_normal(shape[1])
    node = helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-4)
    got = _run(_model(node, {"s": scale, "b": bias}, shape, 17), x)
    along = (-1,) + (1,) * (len(shape) - 2)
    np.testing.assert_allclose(got, _normalized(x, shape[1], 1e-4) * scale.reshape(along) + bias.reshape(along),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("op_type,attrs,inits,message", [
    ("GroupNormalization", {"num_groups": 0}, {"s": np.ones(2), "b": np.ones(2)}, "normalizing 0 groups"),
    ("GroupNormalization", {"num_groups": 3}, {"s": np.ones(3), "b": np.ones(3)}, "normalizing 3 groups"),
    ("Conv", {"kernel_shape": [2]}, {"w": np.ones((2, 4, 3))}, "kernel_shape \\[2\\] differs from the filter's"),
    ("MaxPool", {"kernel_shape": [2], "dilations": [0]}, {}, "dilations must be one int"),
])
def test_malformed_nodes_are_refused_by_name(op_type, attrs, inits, message):
    require("onnx")
    from onnx import helper

    from gradgen.framework.tools.onnx import OnnxImportError

    node = helper.make_node(op_type, ["x", *inits], ["y"], **attrs)
    with pytest.raises(OnnxImportError, match=f"\\({op_type}\\).*{message}"):
        _run(_model(node, inits, (2, 4, 5), 18), np.ones((2, 4, 5)))
