"""Import-time constant folding, Mod, integer Div, ReduceSumSquare, ScatterElements and ScatterND: hand-made
models like exporters' shape arithmetic, the limits and errors of folding, the scatters against ONNX Runtime
with gradients against finite differences, and gradgen's own global-norm clipping through ONNX and back."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from gradgen.framework import Executor, Scope, optimizer
from gradgen.framework.tools.onnx import OnnxImportError, export_onnx, import_onnx
from gradgen.program import Program, layers, program_guard
from tests.onnx.runtime import assert_close, run_ort

F, I64 = TensorProto.FLOAT, TensorProto.INT64
node = helper.make_node


def _model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _ints(name, values):
    return numpy_helper.from_array(np.asarray(values, np.int64), name)


def _run(model, feed):
    program, params, outputs = import_onnx(model)
    scope = Scope()
    for name, value in params.items():
        scope.set(name, value)
    return program, Executor().run(program, feed=feed, fetch_list=list(outputs.values()), scope=scope)


def _heads_model(batch):
    """x[b, s, 12] -> [b, s, 3, 4] with the head count computed as PyTorch's ``unflatten`` exports it:
    Shape -> Gather -> Div/Mod -> Unsqueeze -> Concat -> Reshape."""
    x = helper.make_tensor_value_info("x", F, [batch, 5, 12])
    y = helper.make_tensor_value_info("y", F, None)
    nodes = [node("Shape", ["x"], ["s"]), node("Gather", ["s", "last"], ["d"], axis=0),
             node("Mod", ["d", "heads"], ["rest"]), node("Equal", ["rest", "zero"], ["even"]),
             node("Where", ["even", "heads", "zero"], ["h"]),
             node("Div", ["d", "h"], ["size"]),
             node("Unsqueeze", ["h", "ax"], ["h1"]), node("Unsqueeze", ["size", "ax"], ["s1"]),
             node("Slice", ["s", "start", "two"], ["lead"]),
             node("Concat", ["lead", "h1", "s1"], ["to"], axis=0),
             node("Cast", ["to"], ["to64"], to=I64),
             node("Reshape", ["x", "to64"], ["y"], name="reshape")]
    inits = [_ints("last", 2), _ints("heads", 3), _ints("zero", 0), _ints("ax", [0]), _ints("start", [0]),
             _ints("two", [2])]
    return _model(nodes, [x], [y], inits)


def test_shape_arithmetic_on_static_shapes_folds_to_the_reshape_attr():
    model = _heads_model(2)
    x = np.random.default_rng(0).standard_normal((2, 5, 12)).astype(np.float32)
    program, (y,) = _run(model, {"x": x})
    assert [op.type for op in program.global_block().ops] == ["reshape"]
    assert program.global_block().ops[0].attr("shape") == [2, 5, 3, 4]
    np.testing.assert_array_equal(y, x.reshape(2, 5, 3, 4))
    np.testing.assert_array_equal(y, run_ort(model, {"x": x})["y"])


def test_the_shape_of_a_dim_known_only_at_run_time_is_not_folded():
    x = helper.make_tensor_value_info("x", F, [None, 3])
    fill = numpy_helper.from_array(np.array([2.0], np.float32), "v")
    model = _model([node("Shape", ["x"], ["s"]), node("ConstantOfShape", ["s"], ["c"], value=fill),
                    node("Mul", ["x", "c"], ["y"])], [x], [helper.make_tensor_value_info("y", F, None)])
    program, _, outputs = import_onnx(model)
    for batch in (1, 4):  # one program, run at two batch sizes
        x = np.arange(batch * 3, dtype=np.float32).reshape(batch, 3)
        (y,) = Executor().run(program, feed={"x": x}, fetch_list=list(outputs.values()), scope=Scope())
        np.testing.assert_array_equal(y, 2 * x)


def test_shape_arithmetic_on_a_run_time_batch_folds_the_static_dims_and_keeps_the_batch_a_run_time_dim():
    model = _heads_model(None)
    program, _, outputs = import_onnx(model)
    assert [op.type for op in program.global_block().ops] == ["reshape"]
    assert program.global_block().ops[0].attr("shape") == [0, 5, 3, 4]  # 0: the batch dim, copied at run time
    for batch in (1, 3):
        x = np.random.default_rng(batch).standard_normal((batch, 5, 12)).astype(np.float32)
        (y,) = Executor().run(program, feed={"x": x}, fetch_list=list(outputs.values()), scope=Scope())
        np.testing.assert_array_equal(y, x.reshape(batch, 5, 3, 4))


def _flatten_model(swap):
    """x[b, 4, 3] reshaped to [b * 4, 3] (one run-time entry: inferred), or x[b, s, 3] to [s, b, 3] (two run-time
    entries, neither a copy of x's dim at its place: refused)."""
    x = helper.make_tensor_value_info("x", F, [None, None, 3] if swap else [None, 4, 3])
    if swap:
        picks = [node("Gather", ["s", "one"], ["p0"], axis=0), node("Gather", ["s", "zero"], ["p1"], axis=0)]
    else:
        picks = [node("Gather", ["s", "zero"], ["b"], axis=0), node("Mul", ["b", "four"], ["p0"]),
                 node("Identity", ["three0"], ["p1"])]
    nodes = [node("Shape", ["x"], ["s"]), *picks, node("Unsqueeze", ["p0", "ax"], ["u0"]),
             node("Unsqueeze", ["p1", "ax"], ["u1"]),
             node("Concat", ["u0"] + (["u1"] if swap else []) + ["three"], ["to"], axis=0),
             node("Reshape", ["x", "to"], ["y"], name="flatten")]
    return _model(nodes, [x], [helper.make_tensor_value_info("y", F, None)],
                  [_ints("zero", 0), _ints("one", 1), _ints("four", 4), _ints("ax", [0]), _ints("three", [3]),
                   _ints("three0", 3)])


def test_a_run_time_entry_computed_from_the_batch_is_inferred_and_two_are_an_error_naming_the_reshape():
    program, _, outputs = import_onnx(_flatten_model(swap=False))
    assert program.global_block().ops[-1].attr("shape") == [-1, 3]
    x = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
    (y,) = Executor().run(program, feed={"x": x}, fetch_list=list(outputs.values()), scope=Scope())
    np.testing.assert_array_equal(y, x.reshape(8, 3))
    with pytest.raises(OnnxImportError, match=r"node #6 'flatten' \(Reshape\): a shape with 2 entries known only "
                                              "at run time"):
        import_onnx(_flatten_model(swap=True))


def test_a_float_initializer_stays_a_trainable_parameter_though_its_node_has_only_constant_inputs():
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    x = helper.make_tensor_value_info("x", F, [4, 3])
    model = _model([node("Transpose", ["w"], ["wt"], perm=[1, 0]), node("MatMul", ["x", "wt"], ["y"])], [x],
                   [helper.make_tensor_value_info("y", F, None)], [w])
    program, (y,) = _run(model, {"x": np.ones((4, 3), np.float32)})
    assert [op.type for op in program.global_block().ops] == ["transpose", "matmul"]
    assert program.global_block().var("w").trainable
    np.testing.assert_array_equal(y, np.ones((4, 3)) @ np.arange(6).reshape(2, 3).T)


def test_a_folded_value_over_the_import_limit_is_imported_as_ops_instead():
    x = helper.make_tensor_value_info("x", F, [1])
    one = numpy_helper.from_array(np.ones(1, np.float32), "one")
    model = _model([node("Expand", ["one", "to"], ["big"]), node("Mul", ["x", "big"], ["y"])], [x],
                   [helper.make_tensor_value_info("y", F, None)], [one, _ints("to", [1000, 1000])])
    program, params, _ = import_onnx(model, max_constant_bytes=1000)
    assert "broadcast_to" in [op.type for op in program.global_block().ops]
    assert all(v.size <= 1000 for v in params.values())


def test_a_constant_node_that_fails_to_fold_is_an_error_naming_it():
    x = helper.make_tensor_value_info("x", F, [2, 3])
    model = _model([node("Gather", ["idx", "bad"], ["g"], name="pick", axis=0),
                    node("Reshape", ["x", "g"], ["y"])], [x], [helper.make_tensor_value_info("y", F, None)],
                   [_ints("idx", [3, 2]), _ints("bad", [5])])
    with pytest.raises(OnnxImportError, match=r"node #0 'pick' \(Gather\): folding it at import"):
        import_onnx(model)


@pytest.mark.parametrize("dtype,fmod", [("int64", 0), ("int64", 1), ("float32", 1), ("float64", 1)])
def test_mod_imports_with_both_remainders_as_onnx_runtime_computes_them(dtype, fmod):
    """(ONNX's Mod takes fmod=0 on integers only.)"""
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    model = _model([node("Mod", ["x", "y"], ["z"], fmod=fmod)],
                   [helper.make_tensor_value_info("x", elem, [3, 4]), helper.make_tensor_value_info("y", elem, [4])],
                   [helper.make_tensor_value_info("z", elem, None)])
    rng = np.random.default_rng(fmod)
    feed = {"x": (rng.standard_normal((3, 4)) * 7).astype(dtype), "y": np.array([3, -3, 2.5, -1.5]).astype(dtype)}
    if dtype == "int64":
        feed["y"] = np.array([3, -3, 2, -1], dtype)
    program, (z,) = _run(model, feed)
    assert program.global_block().ops[-1].attr("fmod") == bool(fmod)
    assert_close(z, run_ort(model, feed)["z"], "Mod")


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_div_truncates_as_onnx_runtime_does(dtype):
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    model = _model([node("Div", ["x", "y"], ["z"])],
                   [helper.make_tensor_value_info("x", elem, [6]), helper.make_tensor_value_info("y", elem, [6])],
                   [helper.make_tensor_value_info("z", elem, None)])
    feed = {"x": np.array([7, -7, 7, -7, 0, 2 ** 30], dtype), "y": np.array([2, 2, -2, -2, 3, 7], dtype)}
    _, (z,) = _run(model, feed)
    assert z.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(z, run_ort(model, feed)["z"])
    np.testing.assert_array_equal(z, [3, -3, -3, 3, 0, 2 ** 30 // 7])


def test_reduce_sum_square_imports_as_the_sum_of_squares():
    model = _model([node("ReduceSumSquare", ["x"], ["y"], axes=[1], keepdims=0)],
                   [helper.make_tensor_value_info("x", F, [3, 4])], [helper.make_tensor_value_info("y", F, None)])
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    _, (y,) = _run(model, {"x": x})
    assert_close(y, run_ort(model, {"x": x})["y"], "ReduceSumSquare")


def test_a_program_clipped_by_global_norm_round_trips_through_its_own_export():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x, t = layers.data("x", [-1, 4], "float64"), layers.data("t", [-1, 2], "float64")
        loss = layers.mean(layers.square(layers.fc(x, 2) - t))
        optimizer.SGD(0.1, grad_clip=0.01).minimize(loss)
    assert "clip_by_global_norm" in [op.type for op in main.global_block().ops]
    scope = Scope()
    Executor().run(startup, scope=scope)
    params = {k: np.array(scope[k]) for k in scope}
    model = export_onnx(main, params=params, fetch_list=[loss])
    assert "ReduceSumSquare" in {n.op_type for n in model.graph.node}
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((6, 4)), "t": rng.standard_normal((6, 2))}
    program, imported, outputs = import_onnx(model)
    again = Scope()
    for k, v in imported.items():
        again.set(k, v)
    names = list(outputs)
    got = Executor().run(program, feed=feed, fetch_list=[outputs[n] for n in names], scope=again)
    (want,) = Executor().run(main, feed=feed, fetch_list=[loss], scope=scope)
    assert_close(got[0], want, "loss")
    assert any(n.endswith("@NEW") for n in names)
    for n, value in zip(names[1:], got[1:]):  # the clipped update equals the executor's
        assert_close(value, scope[n[:-4]], n)


def _scatter_model(op_type, data_shape, index, updates_shape, **attrs):
    d = TensorProto.DOUBLE
    inputs = [helper.make_tensor_value_info("data", d, data_shape),
              helper.make_tensor_value_info("updates", d, updates_shape)]
    return _model([node(op_type, ["data", "index", "updates"], ["y"], name="scatter", **attrs)], inputs,
                  [helper.make_tensor_value_info("y", d, None)], [_ints("index", index)])


SCATTERS = {
    "elements-none": ("ScatterElements", [3, 4], [[1, 0, 2, 1], [0, 2, 1, 0]], [2, 4], {"axis": 0}),
    "elements-add-repeats": ("ScatterElements", [3, 4], [[1, 1, -1], [0, 0, 3], [2, 3, 2]], [3, 3],
                             {"axis": 1, "reduction": "add"}),
    "nd-none": ("ScatterND", [4, 3, 2], [[1, 2], [-1, 0], [0, 1]], [3, 2], {}),
    "nd-add-repeats": ("ScatterND", [4, 3, 2], [[[1], [3]], [[1], [0]]], [2, 2, 3, 2], {"reduction": "add"}),
}


@pytest.mark.parametrize("name", sorted(SCATTERS))
def test_scatter_imports_as_onnx_runtime_computes_it_with_gradients_for_data_and_updates(name):
    from gradgen.framework import gradients
    from gradgen.framework.tools.gradcheck import numeric_gradient

    op_type, data_shape, index, updates_shape, attrs = SCATTERS[name]
    model = _scatter_model(op_type, data_shape, index, updates_shape, **attrs)
    rng = np.random.default_rng(5)
    feed = {"data": rng.standard_normal(data_shape), "updates": rng.standard_normal(updates_shape)}
    program, params, outputs = import_onnx(model)
    block = program.global_block()
    with program_guard(program, Program()):
        xs = [block.var("data"), block.var("updates")]
        for v in xs:
            v.stop_gradient = False
        out = block.var(outputs["y"])
        r = layers.data("r", list(out.shape), "float64")
        loss = layers.reduce_sum(layers.multiply(out, r))
        grads = gradients(loss, xs)
    feed["r"] = rng.standard_normal(out.shape)
    scope = Scope()
    for k, v in params.items():
        scope.set(k, v)
    got = Executor().run(program, feed=feed, fetch_list=[out] + grads, scope=scope)
    assert_close(got[0], run_ort(model, feed)["y"], op_type)
    for x, analytic in zip(xs, got[1:]):
        np.testing.assert_allclose(analytic, numeric_gradient(program, feed, scope, loss.name, x.name), rtol=1e-6,
                                   atol=1e-8, err_msg=f"d loss / d {x.name}")


def test_scatter_nd_without_reduction_at_a_repeated_position_is_a_run_time_error_not_a_silent_pick():
    from gradgen.framework.errors import ExecutionError

    model = _scatter_model("ScatterND", [4, 3], [[1], [1]], [2, 3])
    with pytest.raises(ExecutionError, match=r"\(scatter\).*repeat"):
        _run(model, {"data": np.zeros((4, 3)), "updates": np.ones((2, 3))})
