"""mish, hardswish, selu, logsigmoid and gelu's tanh form: compositions of existing ops (``program/layers/math.py``).

Values against PyTorch's functions over the whole domain (infinities, NaN, huge magnitudes, the kinks), on
both engines; finite-difference gradients of first and second order in float64 over several shapes, with
the xla engine's gradients equal to the reference's; ONNX export run in ONNX Runtime, and ONNX's own
``Mish``, ``HardSwish``, ``Selu`` and ``Gelu`` (both forms) nodes imported and checked against ONNX's reference evaluator.
"""
from __future__ import annotations

from importlib.util import find_spec

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, gradients
from gradgen.program import Program, layers, program_guard
from tests.extras import require
from tests.grad.checking import check_op_gradients

LAYERS = {"mish": layers.mish, "hardswish": layers.hardswish, "selu": layers.selu, "logsigmoid": layers.logsigmoid,
          "gelu_tanh": lambda x: layers.gelu(x, approximate=True)}
DOMAIN = np.array([-np.inf, -1e30, -710.0, -100.0, -88.0, -20.0, -3.0, -2.9, -1.0, -1e-8, -0.0, 0.0, 1e-8, 0.5, 3.0,
                   3.1, 20.0, 88.0, 100.0, 710.0, 1e30, np.inf, np.nan])
ENGINES = ["numpy", "xla"]


def _need(module: str, extra: str) -> None:
    require(None if find_spec(module) else module, f"pip install -e '.[{extra}]'")


def _engine(name: str) -> Executor:
    if name == "xla":
        _need("jax", "xla")
    return Executor(backend=name)


def _torch(name: str, x: np.ndarray) -> np.ndarray:
    _need("torch", "oracle")
    import torch
    import torch.nn.functional as F

    fn = {"mish": F.mish, "hardswish": F.hardswish, "selu": F.selu, "logsigmoid": F.logsigmoid,
          "gelu_tanh": lambda t: F.gelu(t, approximate="tanh")}[name]
    return fn(torch.from_numpy(x)).numpy()


def _run(engine: str, name: str, x: np.ndarray) -> np.ndarray:
    main = Program()
    with program_guard(main, Program()):
        out = LAYERS[name](layers.data("x", list(x.shape), str(x.dtype)))
    with np.errstate(all="ignore"):
        (got,) = _engine(engine).run(main, feed={"x": x}, fetch_list=[out], scope=Scope())
    return got


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_values_match_pytorch_over_the_whole_domain(name, dtype, engine):
    x = DOMAIN.astype(dtype)
    got, want = _run(engine, name, x), _torch(name, x)
    assert got.dtype == np.dtype(dtype) and got.shape == x.shape
    tol = 1e-12 if dtype == "float64" else 2e-6
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)  # NaN and infinities must match exactly


def _smooth(shape, seed):
    """Values away from hardswish's kinks at -3 and 3 and selu's at 0."""
    rng = np.random.default_rng(seed)
    return rng.uniform(0.2, 2.8, shape) * rng.choice([-1.0, 1.0], shape)


@pytest.mark.parametrize("shape", [(3,), (2, 3), (2, 1, 4), (1,)])
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_gradients_first_and_second_order_match_finite_differences(name, shape):
    check_op_gradients(LAYERS[name], {"x": _smooth(shape, len(shape))})


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_gradients_through_broadcasting(name):
    """d/dx and d/dy of f(x + y) with y broadcast along x's leading dim."""
    check_op_gradients(lambda x, y: LAYERS[name](x + y), {"x": _smooth((3, 4), 1) / 2, "y": _smooth((4,), 2) / 2})


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_xla_gradients_of_both_orders_equal_the_reference_and_an_empty_batch_works(name):
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 3], "float64")
        loss = layers.reduce_sum(layers.square(LAYERS[name](x)))
        (g,) = gradients(loss, [x])
        (gg,) = gradients(layers.reduce_sum(g), [x])
    for batch in (4, 0):
        feed = {"x": _smooth((batch, 3), batch)}
        want = Executor(backend="numpy").run(main, feed=feed, fetch_list=[loss, g, gg], scope=Scope())
        got = _engine("xla").run(main, feed=feed, fetch_list=[loss, g, gg], scope=Scope())
        for w, v in zip(want, got):
            assert v.shape == w.shape
            np.testing.assert_allclose(v, w, rtol=1e-12, atol=1e-12)


def test_the_backward_program_names_the_ops_the_activation_is_made_of():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2], "float64")
        gradients(layers.reduce_sum(layers.mish(x)), [x])
    types = [op.type for op in main.global_block().ops]
    assert {"softplus", "tanh", "elementwise_mul", "tanh_grad", "sigmoid"} <= set(types)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_export_runs_in_onnx_runtime(name):
    _need("onnx", "onnx")
    _need("onnxruntime", "onnx")
    import onnxruntime

    from gradgen.framework.tools.onnx import export_onnx

    main = Program()
    with program_guard(main, Program()):
        out = LAYERS[name](layers.data("x", [-1, 5], "float32"))
    x = np.random.default_rng(3).uniform(-6, 6, (4, 5)).astype(np.float32)
    model = export_onnx(main, fetch_list=[out])
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"x": x})
    np.testing.assert_allclose(got, _run("numpy", name, x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("node,attrs", [("Mish", {}), ("HardSwish", {}), ("Selu", {}),
                                        ("Selu", {"alpha": 1.5, "gamma": 2.0}), ("Gelu", {}),
                                        ("Gelu", {"approximate": "tanh"})])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_onnx_nodes_import_as_the_composition(node, attrs, dtype):
    _need("onnx", "onnx")
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    from gradgen.framework.tools.onnx import import_onnx

    elem = TensorProto.FLOAT if dtype == "float32" else TensorProto.DOUBLE
    graph = helper.make_graph([helper.make_node(node, ["x"], ["y"], **attrs)], "g",
                              [helper.make_tensor_value_info("x", elem, [2, 6])],
                              [helper.make_tensor_value_info("y", elem, [2, 6])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    x = np.linspace(-5, 5, 12).reshape(2, 6).astype(dtype)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    program, params, outs = import_onnx(model)
    (got,) = Executor().run(program, feed={"x": x}, fetch_list=[outs["y"]], scope=Scope())
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == "float32" else 1e-12, atol=1e-7)


def test_a_gelu_node_of_an_unknown_form_is_an_import_error_naming_the_attr():
    _need("onnx", "onnx")
    from onnx import TensorProto, helper

    from gradgen.framework.tools.onnx import OnnxImportError, import_onnx

    graph = helper.make_graph([helper.make_node("Gelu", ["x"], ["y"], approximate="sigmoid")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    with pytest.raises(OnnxImportError, match="approximate"):
        import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)]))
