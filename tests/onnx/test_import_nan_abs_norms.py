"""Importer entries met in ``transformers`` models: IsNaN (every ``sdpa`` attention with a padding mask), IsInf,
Abs / Neg / Sign / Relu / Clip of integers (T5's relative position buckets), ReduceL2 (``torch.norm``, ConvNeXt
V2's global response norm), ReduceL1: against ONNX Runtime on both engines, and ReduceL2's gradient against
finite differences (first and second order, float64) and against PyTorch at an all-zero row, where it is 0."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from tests.onnx.runtime import assert_close, require, run_ort

INT64_MAX, INT64_MIN = 2 ** 63 - 1, -2 ** 63


def _model(op_type, x_elem, x_shape, inits=(), inputs=(), opset=18, **attrs):
    require("onnx")
    from onnx import helper

    graph = helper.make_graph([helper.make_node(op_type, ["x", *inputs], ["y"], **attrs)], "g",
                              [helper.make_tensor_value_info("x", x_elem, list(x_shape))],
                              [helper.make_tensor_value_info("y", 9 if op_type.startswith("Is") else x_elem, None)],
                              initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _import(model):
    from gradgen.framework import Scope
    from gradgen.framework.tools.onnx import import_onnx

    program, params, outputs = import_onnx(model)
    scope = Scope()
    for name, value in params.items():
        scope.set(name, value)
    return program, scope, outputs


def _run(model, x, backend):
    from gradgen.framework import Executor

    program, scope, outputs = _import(model)
    return Executor(backend=backend).run(program, feed={"x": x}, fetch_list=list(outputs.values()), scope=scope)[0]


def _cases():
    from onnx import TensorProto, numpy_helper

    F, D, I64 = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT64
    special = np.array([[0.0, -0.0, np.nan, np.inf], [-np.inf, 1.5, -2.0, 1e308]])
    ints = np.array([[0, 1, -1, 2 ** 53 + 1], [INT64_MAX, INT64_MIN + 1, -(2 ** 53 + 1), 7]], np.int64)
    rows = np.array([[0.0, 0.0, 0.0, 0.0], [3.0, -4.0, 1e-3, 2.0]])
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    none = numpy_helper.from_array(np.array([], np.int64), "axes")
    return {
        "IsNaN": (_model("IsNaN", D, special.shape), special),
        "IsNaN float32": (_model("IsNaN", F, special.shape), np.where(np.abs(special) > 1e38, np.inf, special)
                          .astype(np.float32)),  # 1e308 as float32 is inf: said, not warned
        "IsInf": (_model("IsInf", D, special.shape), special),
        "IsInf positive": (_model("IsInf", D, special.shape, detect_negative=0), special),
        "IsInf negative": (_model("IsInf", D, special.shape, detect_positive=0), special),
        "IsInf neither": (_model("IsInf", D, special.shape, detect_positive=0, detect_negative=0), special),
        "Abs int64": (_model("Abs", I64, ints.shape), ints),
        "Neg int64": (_model("Neg", I64, ints.shape), ints),
        "Sign int64": (_model("Sign", I64, ints.shape), ints),
        "Relu int64": (_model("Relu", I64, ints.shape), ints),
        "Clip int64": (_model("Clip", I64, ints.shape, [numpy_helper.from_array(np.array(-(2 ** 53 + 1)), "lo"),
                                                       numpy_helper.from_array(np.array(2 ** 53 + 1), "hi")],
                              ["lo", "hi"]), ints),
        "Clip int64 above": (_model("Clip", I64, ints.shape, [numpy_helper.from_array(np.array(7), "lo")], ["lo"]),
                             ints),
        "Abs int32": (_model("Abs", TensorProto.INT32, ints.shape), (ints % 1000 - 500).astype(np.int32)),
        "ReduceL2": (_model("ReduceL2", D, rows.shape, [axes], ["axes"]), rows),
        "ReduceL2 all": (_model("ReduceL2", F, rows.shape, keepdims=0), rows.astype(np.float32)),
        "ReduceL2 opset 13": (_model("ReduceL2", D, rows.shape, opset=13, axes=[0], keepdims=0), rows),
        "ReduceL2 noop": (_model("ReduceL2", D, rows.shape, [none], ["axes"], noop_with_empty_axes=1), -rows),
        "ReduceL1": (_model("ReduceL1", D, rows.shape, [axes], ["axes"]), -rows),
        "ReduceL1 int64": (_model("ReduceL1", I64, ints.shape, [axes], ["axes"]), ints % 1000 - 500),
        "ReduceSumSquare": (_model("ReduceSumSquare", D, rows.shape, [axes], ["axes"], keepdims=0), rows),
        "ReduceLogSumExp": (_model("ReduceLogSumExp", D, rows.shape, [axes], ["axes"]), rows),
    }


@pytest.mark.parametrize("backend", ["numpy", "xla"])
def test_each_entry_computes_as_onnx_runtime(backend):
    require("onnxruntime")
    if backend == "xla":
        require("jax")
    wrong = []
    for name, (model, x) in _cases().items():
        want = run_ort(model, {"x": x})["y"]
        try:
            got = _run(model, x, backend)
            assert_close(got, want, name)
        except AssertionError as e:
            wrong.append(f"{name}: {str(e).strip().splitlines()[0]}\n  got {got!r}\n  want {want!r}")
    assert not wrong, "\n".join(wrong)


def _norm_gradient_program(x_shape):
    """The imported ReduceL2 over axis 1 (float64) with loss = sum(y * r) and d loss / d x appended."""
    from onnx import TensorProto, numpy_helper

    from gradgen.framework import gradients
    from gradgen.program import layers, program_guard

    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    program, scope, outputs = _import(_model("ReduceL2", TensorProto.DOUBLE, x_shape, [axes], ["axes"],
                                             keepdims=0))
    block = program.global_block()
    x, y = block.var("x"), block.var(outputs["y"])
    x.stop_gradient = False
    with program_guard(program):
        r = layers.data("r", list(y.shape), "float64")
        loss = layers.reduce_sum(y * r)
        (grad,) = gradients(loss, [x])
    return program, scope, x, loss, grad


def test_reduce_l2_gradient_matches_finite_differences_first_and_second_order():
    require("onnx")
    from gradgen.framework import Executor
    from gradgen.framework.tools.gradcheck import numeric_gradient
    from tests.grad.checking import check_second_order_pairs

    rng = np.random.default_rng(3)
    program, scope, x, loss, grad = _norm_gradient_program((3, 4))
    feed = {"x": rng.standard_normal((3, 4)), "r": rng.standard_normal(3)}
    exe = Executor(check_types=True)
    (analytic,) = exe.run(program, feed=feed, fetch_list=[grad], scope=scope)
    np.testing.assert_allclose(analytic, numeric_gradient(program, feed, scope, loss.name, "x"), rtol=1e-6,
                               atol=1e-8)
    check_second_order_pairs(program, exe, feed, scope, [x], [grad], rng, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", ["numpy", "xla"])
def test_reduce_l2_gradient_at_an_all_zero_row_is_zero_as_pytorch_gives(backend):
    """The norm has no derivative at 0; PyTorch's ``vector_norm`` backward gives 0 there (the subgradient of least
    norm), and so must the import: a plain sqrt of a sum of squares would give 0 * inf = NaN."""
    torch = require("torch")
    if backend == "xla":
        require("jax")
    from gradgen.framework import Executor

    x = np.array([[0.0, 0.0, 0.0, 0.0], [3.0, -4.0, 0.0, 1e-3], [1e-200, 0.0, 0.0, -1e-200]])
    r = np.array([2.0, -1.0, 0.5])
    program, scope, _, _, grad = _norm_gradient_program(x.shape)
    (got,) = Executor(backend=backend).run(program, feed={"x": x, "r": r}, fetch_list=[grad], scope=scope)
    tx = torch.tensor(x, requires_grad=True)
    (torch.linalg.vector_norm(tx, dim=1) * torch.tensor(r)).sum().backward()
    assert np.isfinite(got).all(), got
    np.testing.assert_array_equal(got[0], 0.0)
    np.testing.assert_allclose(got, tx.grad.numpy(), rtol=1e-12, atol=0)


@pytest.mark.parametrize("backend", ["numpy", "xla"])
def test_t5_relative_position_buckets_exported_by_pytorch_match_it(backend):
    """T5's ``_relative_position_bucket`` (bidirectional), as PyTorch exports it: Abs of int64, a Log of the
    float cast, a Cast back, Min and Where on int64; relative positions fed at run time."""
    torch = require("torch")
    require("onnx")
    if backend == "xla":
        require("jax")
    import io
    import math

    from onnx import load_from_string

    class Buckets(torch.nn.Module):
        def forward(self, relative_position):
            half = 16 // 2
            buckets = (relative_position > 0).to(torch.long) * half
            distance = torch.abs(relative_position)
            exact = half // 2
            far = exact + (torch.log(distance.float() / exact) / math.log(128 / exact) * (half - exact)).to(torch.long)
            far = torch.min(far, torch.full_like(far, half - 1))
            return buckets + torch.where(distance < exact, distance, far)

    positions = torch.arange(-300, 300, 7, dtype=torch.long).reshape(1, -1)
    buf = io.BytesIO()
    with warnings.catch_warnings():  # the TorchScript exporter's deprecation notice
        warnings.simplefilter("ignore")
        torch.onnx.export(Buckets(), (positions,), buf, dynamo=False, opset_version=17, input_names=["p"],
                          dynamic_axes={"p": {0: "n", 1: "m"}})
    model = load_from_string(buf.getvalue())
    assert "Abs" in {n.op_type for n in model.graph.node}
    from gradgen.framework import Executor

    program, scope, outputs = _import(model)
    (got,) = Executor(backend=backend).run(program, feed={"p": positions.numpy()}, fetch_list=list(outputs.values()),
                                           scope=scope)
    np.testing.assert_array_equal(got, Buckets()(positions).numpy())
    assert got.dtype == np.int64
