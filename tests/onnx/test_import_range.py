"""ONNX's Range (``torch.arange``: the position ids of ``transformers`` models): constants computed at import
(integers exactly), and a limit that is a run-time dim (a dynamic sequence length) on both engines, against
PyTorch and ONNX Runtime; what is refused is refused by name."""
from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

from tests.onnx.runtime import require, run_ort


def _range_model(start, limit, delta, dtype):
    require("onnx")
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(np.array(v, dtype), n) for n, v in zip(("a", "b", "c"), (start, limit, delta))]
    graph = helper.make_graph([helper.make_node("Range", ["a", "b", "c"], ["y"])], "g", [],
                              [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                                                             None)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("start,limit,delta,dtype", [
    (0, 10, 3, np.int64), (10, -3, -4, np.int64), (5, 5, 1, np.int64), (5, 2, 1, np.int32),
    (2 ** 53 + 1, 2 ** 53 + 6, 2, np.int64), (2 ** 63 - 3, -2 ** 63, -(2 ** 62), np.int64),
    (0.5, 2.3, 0.4, np.float32), (1.0, -1.0, -0.25, np.float64)])
def test_a_constant_range_is_onnx_s(start, limit, delta, dtype):
    """Integers as ONNX Runtime gives them; floats as ONNX defines them, start + i * delta in the dtype (ONNX
    Runtime adds delta i times: float32 0.5 + 3 * 0.4 is 1.7 there 1.6999999), with ONNX Runtime's count."""
    from gradgen.framework import Executor, Scope
    from gradgen.framework.tools.onnx import import_onnx

    model = _range_model(start, limit, delta, dtype)
    want = run_ort(model, {})["y"]
    if want.dtype.kind == "f":
        want = dtype(start) + dtype(delta) * np.arange(len(want), dtype=dtype)
    program, params, outputs = import_onnx(model)
    scope = Scope()
    for name, value in params.items():
        scope.set(name, value)
    (got,) = Executor(backend="numpy").run(program, feed={}, fetch_list=list(outputs.values()), scope=scope)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_a_range_of_step_zero_or_beyond_the_import_limit_is_refused_by_name():
    from gradgen.framework.tools.onnx import OnnxImportError, import_onnx

    with pytest.raises(OnnxImportError, match=r"\(Range\): start 0, limit 5, delta 0 \(a Range step of 0"):
        import_onnx(_range_model(0, 5, 0, np.int64))
    with pytest.raises(OnnxImportError, match=r"\(Range\): the Range of shape \[4611686018427387904\]"):
        import_onnx(_range_model(0, 2 ** 62, 1, np.int64))


@pytest.mark.parametrize("backend", ["numpy", "xla"])
def test_position_ids_of_a_dynamic_sequence_length_match_pytorch(backend):
    """``arange(n)``, ``arange(2, n, 3)`` and an int32 ``arange(n)`` with n = ids.shape[1] exported with dynamic
    axes: imported once, run at three lengths."""
    torch = require("torch")
    if backend == "xla":
        require("jax")
    from onnx import load_from_string

    from gradgen.framework import Executor, Scope
    from gradgen.framework.tools.onnx import import_onnx

    class Positions(torch.nn.Module):
        def forward(self, ids):
            n = ids.shape[1]
            return torch.arange(n)[None, :] + 0 * ids, torch.arange(2, n, 3), torch.arange(n, dtype=torch.int32)

    buf = io.BytesIO()
    with warnings.catch_warnings():  # the TorchScript exporter's deprecation notice
        warnings.simplefilter("ignore")
        torch.onnx.export(Positions(), (torch.zeros(2, 11, dtype=torch.long),), buf, dynamo=False, opset_version=17,
                          input_names=["ids"], dynamic_axes={"ids": {0: "b", 1: "s"}})
    model = load_from_string(buf.getvalue())
    assert "Range" in {n.op_type for n in model.graph.node}
    program, _, outputs = import_onnx(model)
    for length in (3, 7, 12):
        ids = torch.zeros(2, length, dtype=torch.long)
        got = Executor(backend=backend).run(program, feed={"ids": ids.numpy()}, fetch_list=list(outputs.values()),
                                            scope=Scope())
        for g, w in zip(got, Positions()(ids)):
            assert g.dtype == w.numpy().dtype
            np.testing.assert_array_equal(g, w.numpy())


def test_a_range_with_a_run_time_start_or_a_float_step_is_refused_by_name():
    require("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from gradgen.framework.tools.onnx import OnnxImportError, import_onnx

    def model(start, delta):
        nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "one"], ["n"], axis=0),
                 helper.make_node("Range", ["a", "n", "c"], ["y"])]
        inits = [numpy_helper.from_array(np.array(1, np.int64), "one"),
                 numpy_helper.from_array(np.array(start, np.int64), "a"),
                 numpy_helper.from_array(np.array(delta, np.int64), "c")]
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, None])],
                                  [helper.make_tensor_value_info("y", TensorProto.INT64, None)], initializer=inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    for start, delta in ((-1, 1), (0, -1), (0, 0)):
        with pytest.raises(OnnxImportError, match=r"\(Range\): start -?\d+ and step -?\d+ with a run-time limit"):
            import_onnx(model(start, delta))


def _run_time_range_model(form: str):
    """A Range named 'positions' with some input known only at run time, as ``form`` says; the graph input is
    ``x`` [2, n] float, ``k`` a scalar int64."""
    from onnx import TensorProto, helper, numpy_helper

    consts = {"zero": 0, "one": 1, "ten": 10}
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "one"], ["n"], axis=0),
             helper.make_node("Add", ["n", "one"], ["n1"])]
    start, limit, step = {"start fed": ("k", "ten", "one"), "step fed": ("zero", "ten", "k"),
                          "start a dim": ("n", "ten", "one"), "limit computed": ("zero", "n1", "one"),
                          "start and step fed": ("k", "n", "k")}[form]
    nodes.append(helper.make_node("Range", [start, limit, step], ["y"], name="positions"))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, None]),
                                           helper.make_tensor_value_info("k", TensorProto.INT64, [])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, None)],
                              initializer=[numpy_helper.from_array(np.array(v, np.int64), n)
                                           for n, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("form, said", [
    ("start fed", "start 'k' known only at run time"), ("step fed", "step 'k' known only at run time"),
    ("start a dim", "start 'n' known only at run time"),
    ("limit computed", "limit 'n1' computed at run time, not one dim of a var's shape"),
    ("start and step fed", "start 'k', limit 'n' and step 'k' known only at run time")])
def test_a_range_whose_length_follows_from_values_is_refused_naming_the_node_and_input(form, said):
    """ONNX Runtime runs each model (its length is data); the import refuses it as an OnnxImportError naming the
    node, its type, the input at fault and what a Range may be, never a wrong length."""
    require("onnx")
    from gradgen.framework.tools.onnx import OnnxImportError, import_onnx

    model = _run_time_range_model(form)
    ran = run_ort(model, {"x": np.zeros((2, 4), np.float32), "k": np.array(2, np.int64)})["y"]
    assert ran.dtype == np.int64 and ran.size > 0
    with pytest.raises(OnnxImportError, match=rf"'positions' \(Range\): {said}: a Range's length must follow from "
                                              r"shapes, not from values"):
        import_onnx(model)
