"""The importer's Floor (exact, special values included), Size and Range over dims known only at run time,
EyeLike, and ReduceMax/ReduceMin over an empty axis: the nodes gradgen's own export writes."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope
from tests.onnx.runtime import require


def _model(nodes, inputs, outputs, opset: int = 17):
    from onnx import helper

    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                             opset_imports=[helper.make_opsetid("", opset)])


def _run(model, feed: dict) -> list:
    from gradgen.framework import import_onnx

    program, params, outputs = import_onnx(model)
    scope = Scope()
    for name, value in params.items():
        scope.set(name, value)
    with np.errstate(all="ignore"):
        return Executor().run(program, feed=feed, fetch_list=list(outputs.values()), scope=scope)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_floor_is_exact_on_every_kind_of_value(dtype):
    require("onnx")
    from onnx import helper, TensorProto

    elem = {"float16": TensorProto.FLOAT16, "float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE}[dtype]
    info = np.finfo(dtype)
    x = np.array([0.0, -0.0, 0.3, -0.3, 0.5, -0.5, 2.0, -2.0, 2.5, -2.5, 1 - info.eps / 2, -(1 - info.eps / 2),
                  info.tiny, -info.tiny, 1 / info.eps + 1, -(1 / info.eps) - 1, info.max, -info.max, np.inf, -np.inf,
                  np.nan], dtype)
    x = np.concatenate([x, np.random.default_rng(0).uniform(-1e3, 1e3, 200).astype(dtype)])
    model = _model([helper.make_node("Floor", ["x"], ["y"])], [helper.make_tensor_value_info("x", elem, [-1])],
                   [helper.make_tensor_value_info("y", elem, None)])
    (got,) = _run(model, {"x": x})
    want = np.floor(x)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))  # floor(-0.0) is -0.0


def test_size_and_range_of_a_dim_known_only_at_run_time():
    require("onnx")
    from onnx import helper, TensorProto

    nodes = [helper.make_node("Size", ["x"], ["n"]),
             helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Constant", [], ["one"], value=helper.make_tensor("one", TensorProto.INT64, [1], [1])),
             helper.make_node("Gather", ["s", "one"], ["d"], axis=0),
             helper.make_node("Squeeze", ["d"], ["dim"]),
             helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("zero", TensorProto.INT64, [], [0])),
             helper.make_node("Constant", [], ["step"], value=helper.make_tensor("step", TensorProto.INT64, [], [1])),
             helper.make_node("Range", ["zero", "dim", "step"], ["r"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, -1, 3])],
                   [helper.make_tensor_value_info("n", TensorProto.INT64, None),
                    helper.make_tensor_value_info("r", TensorProto.INT64, None)])
    for length in (0, 1, 5):
        n, r = _run(model, {"x": np.zeros((2, length, 3), np.float32)})
        assert n.dtype == np.int64 and n.shape == () and int(n) == 6 * length
        np.testing.assert_array_equal(r, np.arange(length, dtype=np.int64))
        assert r.dtype == np.int64


def test_a_range_to_a_run_time_limit_it_cannot_enumerate_is_refused():
    require("onnx")
    from onnx import helper, TensorProto

    from gradgen.framework import import_onnx
    from gradgen.framework.tools.onnx import OnnxImportError

    nodes = [helper.make_node("Shape", ["x"], ["s"], start=0, end=1),
             helper.make_node("Squeeze", ["s"], ["dim"]),
             helper.make_node("Constant", [], ["back"], value=helper.make_tensor("back", TensorProto.INT64, [], [-1])),
             helper.make_node("Constant", [], ["one"], value=helper.make_tensor("one", TensorProto.INT64, [], [1])),
             helper.make_node("Range", ["back", "dim", "one"], ["r"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1])],
                   [helper.make_tensor_value_info("r", TensorProto.INT64, None)])
    with pytest.raises(OnnxImportError, match=r"node #4 .*\(Range\): start -1 and step 1 with a run-time limit"):
        import_onnx(model)


def test_eye_like_takes_its_shape_diagonal_and_dtype():
    require("onnx")
    from onnx import helper, TensorProto

    nodes = [helper.make_node("EyeLike", ["x"], ["a"], k=1), helper.make_node("EyeLike", ["x"], ["b"], k=-2,
                                                                                dtype=TensorProto.INT64)]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [3, 4])],
                   [helper.make_tensor_value_info(n, t, None) for n, t in (("a", TensorProto.DOUBLE),
                                                                            ("b", TensorProto.INT64))])
    a, b = _run(model, {"x": np.zeros((3, 4))})
    np.testing.assert_array_equal(a, np.eye(3, 4, 1))
    np.testing.assert_array_equal(b, np.eye(3, 4, -2, dtype=np.int64))
    assert (a.dtype, b.dtype) == (np.float64, np.int64)


@pytest.mark.parametrize("op, value", [("ReduceMax", -np.inf), ("ReduceMin", np.inf)])
def test_max_and_min_over_an_empty_axis_are_onnxs_infinities(op, value):
    require("onnx")
    from onnx import helper, TensorProto

    nodes = [helper.make_node(op, ["x"], ["y"], axes=[1], keepdims=0)]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 0, 2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], opset=17)
    (got,) = _run(model, {"x": np.zeros((3, 0, 2), np.float32)})
    np.testing.assert_array_equal(got, np.full((3, 2), value, np.float32))
    assert got.dtype == np.float32


@pytest.mark.parametrize("start, limit, delta", [(0.0, np.nan, 1.0), (0.0, np.inf, 1.0), (1.0, 5.0, 0.0)])
def test_a_range_that_has_no_length_is_refused_by_name(start, limit, delta):
    require("onnx")
    from onnx import helper, TensorProto

    from gradgen.framework import import_onnx
    from gradgen.framework.tools.onnx import OnnxImportError

    consts = [helper.make_node("Constant", [], [n], value=helper.make_tensor(n, TensorProto.DOUBLE, [], [v]))
              for n, v in (("a", start), ("b", limit), ("c", delta))]
    model = _model(consts + [helper.make_node("Range", ["a", "b", "c"], ["r"], name="range")], [],
                   [helper.make_tensor_value_info("r", TensorProto.DOUBLE, None)])
    with pytest.raises(OnnxImportError, match=r"node #3 'range' \(Range\): .*start .*limit .*delta"):
        import_onnx(model)
