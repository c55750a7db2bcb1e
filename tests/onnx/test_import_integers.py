"""Integers through the ONNX importer are exact: every path by which an integer constant of a model reaches the
program (Constant's value / value_int / value_ints, initializers, ConstantOfShape, Slice starts and ends, Pad's
value, Gather of constants, folding, shape arithmetic) carries 2**53 + 1, -(2**53 + 1), INT64_MAX and INT64_MIN
unchanged, on the numpy and the xla engine, checked element for element against ONNX Runtime.
A float anywhere on the way would turn 2**53 + 1 into 2**53 and INT64_MAX into a number no int64 holds."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from tests.onnx.runtime import require, run_ort

INT64_MAX, INT64_MIN = 2 ** 63 - 1, -2 ** 63
VALUES = [2 ** 53 + 1, -(2 ** 53 + 1), INT64_MAX, INT64_MIN]
X = np.array([0, 1, -1, 7], np.int64)


def _onnx():
    require("onnx")
    from onnx import TensorProto, helper, numpy_helper

    return TensorProto, helper, numpy_helper


def _model(nodes, outputs, inits=(), x_shape=(4,)):
    TensorProto, helper, _ = _onnx()
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.INT64, list(x_shape))],
                              [helper.make_tensor_value_info(o, TensorProto.INT64, None) for o in outputs],
                              initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _tensor(name, values):
    return _onnx()[2].from_array(np.asarray(values, np.int64), name)


def _loop_body():
    """i, c, v -> (i < 2, v + 1): three steps unless the trip count stops it first."""
    TensorProto, helper, _ = _onnx()
    info = helper.make_tensor_value_info
    return helper.make_graph(
        [helper.make_node("Add", ["v", "one"], ["v2"]), helper.make_node("Less", ["i", "two"], ["c2"])], "body",
        [info("i", TensorProto.INT64, []), info("c", TensorProto.BOOL, []), info("v", TensorProto.INT64, [4])],
        [info("c2", TensorProto.BOOL, []), info("v2", TensorProto.INT64, [4])],
        initializer=[_tensor("one", 1), _tensor("two", 2)])


def _paths(v: int) -> dict:
    """Path name -> (nodes, outputs, initializers, x's shape) of a model computing with the constant ``v``."""
    _, helper, _ = _onnx()
    node = helper.make_node
    at = lambda *nodes: list(nodes)  # noqa: E731
    return {
        "Constant value, scalar": (at(node("Constant", [], ["k"], value=_tensor("k", v)),
                                      node("Add", ["x", "k"], ["y"])), ["y"], [], (4,)),
        "Constant value, unequal": (at(node("Constant", [], ["k"], value=_tensor("k", [v, 0, v, 1])),
                                       node("Sub", ["x", "k"], ["y"])), ["y"], [], (4,)),
        "Constant value_int": (at(node("Constant", [], ["k"], value_int=v), node("Add", ["x", "k"], ["y"])),
                               ["y"], [], (4,)),
        "Constant value_ints": (at(node("Constant", [], ["k"], value_ints=[v, v, v, v]),
                                   node("Mul", ["x", "k"], ["y"])), ["y"], [], (4,)),
        "Constant value_ints, unequal": (at(node("Constant", [], ["k"], value_ints=[v, 3, -v if v != INT64_MIN
                                                                                    else 5, 0]),
                                            node("Add", ["x", "k"], ["y"])), ["y"], [], (4,)),
        "initializer, scalar": (at(node("Add", ["x", "k"], ["y"])), ["y"], [_tensor("k", v)], (4,)),
        "initializer, vector": (at(node("Max", ["x", "k"], ["y"])), ["y"], [_tensor("k", [v, 1, v, 2])], (4,)),
        "ConstantOfShape, folded": (at(node("ConstantOfShape", ["s"], ["k"], value=_tensor("v", [v])),
                                       node("Add", ["x", "k"], ["y"])), ["y"], [_tensor("s", [4])], (4,)),
        "ConstantOfShape, run-time shape": (at(node("Shape", ["x"], ["s"]),
                                               node("ConstantOfShape", ["s"], ["k"], value=_tensor("v", [v])),
                                               node("Add", ["x", "k"], ["y"])), ["y"], [], (None,)),
        "folded arithmetic": (at(node("Constant", [], ["a"], value=_tensor("a", v)),
                                 node("Constant", [], ["b"], value=_tensor("b", [1, -1, 0, 2])),
                                 node("Add", ["a", "b"], ["k"]), node("Sub", ["k", "x"], ["y"])), ["y"], [], (4,)),
        "Gather of a constant": (at(node("Gather", ["table", "i"], ["k"], axis=0),
                                    node("Add", ["x", "k"], ["y"])), ["y"],
                                 [_tensor("table", [v, 5, v - 1 if v != INT64_MIN else v + 1]),
                                  _tensor("i", [0, 2, 1, 0])], (4,)),
        "Div, folded": (at(node("Div", ["k", "d"], ["q"]), node("Add", ["x", "q"], ["y"])), ["y"],
                        [_tensor("k", [v, v, v - 1 if v != INT64_MIN else v + 1, v]), _tensor("d", [1, -3, 3, 7])],
                        (4,)),
        "Div, run-time": (at(node("Sub", ["k", "x"], ["n"]), node("Div", ["n", "d"], ["y"])), ["y"],
                          [_tensor("k", v if v < 0 else v - 7), _tensor("d", [1, -3, 2, 7])], (4,)),
        "Clip bounds": (at(node("Add", ["x", "k"], ["n"]), node("Clip", ["n", "lo", "hi"], ["y"])), ["y"],
                        [_tensor("k", v if v < 0 else v - 7), _tensor("lo", v if v < 0 else v - 7),
                         _tensor("hi", v + 1 if v < 0 else v - 7)], (4,)),
        "Range": (at(node("Range", ["r0", "r1", "r2"], ["k"]), node("Add", ["x", "k"], ["y"])), ["y"],
                  [_tensor("r0", v if v < 2 ** 62 else v - 4), _tensor("r1", (v if v < 2 ** 62 else v - 4) + 4),
                   _tensor("r2", 1)], (4,)),
        "Range backwards": (at(node("Range", ["r0", "r1", "r2"], ["y"])), ["y"],
                            [_tensor("r0", v if v > -2 ** 62 else v + 12), _tensor("r1", -2 ** 63),
                             _tensor("r2", -(2 ** 62))], (4,)),
        "Trilu k": (at(node("Reshape", ["x", "square"], ["m"]), node("Trilu", ["m", "k"], ["y"], upper=1),
                       node("Trilu", ["m", "k"], ["z"], upper=0)), ["y", "z"],
                    [_tensor("square", [2, 2]), _tensor("k", v)], (4,)),
        "Loop trip count": (at(node("Loop", ["n", "go", "x"], ["y"], body=_loop_body())), ["y"],
                            [_tensor("n", v), _onnx()[2].from_array(np.array(True), "go")], (4,)),
        "Pad value": (at(node("Pad", ["x", "pads", "value"], ["y"])), ["y"],
                      [_tensor("pads", [1, 2]), _tensor("value", v)], (4,)),
        "Slice ends": (at(node("Slice", ["x", "starts", "ends"], ["y"])), ["y"],
                       [_tensor("starts", [1 if v > 0 else v]), _tensor("ends", [v if v > 0 else INT64_MAX])], (4,)),
        "Slice ends, run-time length": (at(node("Slice", ["x", "starts", "ends"], ["y"])), ["y"],
                                        [_tensor("starts", [1 if v > 0 else v]),
                                         _tensor("ends", [v if v > 0 else INT64_MAX])], (None,)),
        "Slice backwards": (at(node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])), ["y"],
                            [_tensor("starts", [v]), _tensor("ends", [INT64_MIN]), _tensor("axes", [0]),
                             _tensor("steps", [-1])], (4,)),
        "shape arithmetic": (at(node("Shape", ["x"], ["s"]), node("Concat", ["s", "three"], ["ss"], axis=0),
                                node("Add", ["ss", "k"], ["t"]),
                                node("Slice", ["t", "starts", "ends", "axes", "steps"], ["y"])), ["y"],
                             [_tensor("three", [3]), _tensor("k", [0, v]), _tensor("starts", [INT64_MAX]),
                              _tensor("ends", [-2]), _tensor("axes", [0]), _tensor("steps", [-1])], (None,)),
    }


def _reference(model, x):
    """ONNX Runtime's results: its Slice clamps as ONNX's text says; onnx's ReferenceEvaluator slices as Python
    does, which for a negative step and a start below -size picks nothing where ONNX starts at index 0."""
    return list(run_ort(model, {"x": x}).values())


def _gradgen(model, x, backend):
    from gradgen.framework import Executor, Scope
    from gradgen.framework.tools.onnx import import_onnx

    program, params, outputs = import_onnx(model)
    scope = Scope()
    for name, value in params.items():
        scope.set(name, value)
    return Executor(backend=backend).run(program, feed={"x": x}, fetch_list=list(outputs.values()), scope=scope)


@pytest.mark.parametrize("backend", ["numpy", "xla"])
@pytest.mark.parametrize("v", VALUES, ids=["2**53+1", "-(2**53+1)", "INT64_MAX", "INT64_MIN"])
def test_every_integer_constant_path_is_exact(v, backend):
    if backend == "xla":
        require("jax")
    wrong = []
    for path, (nodes, outputs, inits, shape) in _paths(v).items():
        model = _model(nodes, outputs, inits, shape)
        want = _reference(model, X)
        try:
            got = _gradgen(model, X, backend)
        except Exception as e:  # noqa: BLE001 - every path is reported, not just the first
            wrong.append(f"{path}: {type(e).__name__}: {str(e).splitlines()[0]}")
            continue
        for g, w in zip(got, want):
            if g.dtype != w.dtype or g.shape != w.shape or not np.array_equal(g, w):
                wrong.append(f"{path}: {g!r}, want {w!r}")
    assert not wrong, "\n".join(wrong)


def test_a_slice_backwards_from_below_the_start_picks_the_first_element_as_onnx_says():
    """ONNX clamps a negative step's start into [0, size - 1]: a start below -size begins at index 0 (Python's
    slice would pick nothing there)."""
    from gradgen.framework.tools.onnx.import_integer_rules import onnx_slice_range

    assert list(onnx_slice_range(-100, INT64_MIN, -1, 4)) == [0]
    assert list(onnx_slice_range(INT64_MAX, INT64_MIN, -2, 5)) == [4, 2, 0]
    assert list(onnx_slice_range(1, INT64_MAX, 1, 4)) == [1, 2, 3]
    assert list(onnx_slice_range(INT64_MIN, -1, 1, 4)) == [0, 1, 2]
    assert list(onnx_slice_range(-2, -1, -1, 4)) == []


def test_a_pytorch_open_ended_slice_imports_and_computes_as_pytorch():
    """``x[:, 1:]`` (LLaMA's rotary halves) exports its end as INT64_MAX; ``x.flip`` and negative starts too."""
    torch = require("torch")
    import io

    from onnx import load_from_string

    class Halves(torch.nn.Module):
        def forward(self, x):
            return x[:, 1:] * 2, x[:, : x.shape[1] // 2], x[:, -2:]

    x = torch.arange(12, dtype=torch.float64).reshape(2, 6)
    buf = io.BytesIO()
    with warnings.catch_warnings():  # the TorchScript exporter's deprecation notice
        warnings.simplefilter("ignore")
        torch.onnx.export(Halves(), (x,), buf, dynamo=False, opset_version=17, input_names=["x"],
                          dynamic_axes={"x": {0: "b"}})
    model = load_from_string(buf.getvalue())
    assert any(n.op_type == "Slice" for n in model.graph.node)
    from gradgen.framework import Executor, Scope
    from gradgen.framework.tools.onnx import import_onnx

    program, params, outputs = import_onnx(model)
    scope = Scope()
    for name, value in params.items():
        scope.set(name, value)
    got = Executor(backend="numpy").run(program, feed={"x": x.numpy()}, fetch_list=list(outputs.values()),
                                        scope=scope)
    for g, w in zip(got, Halves()(x)):
        np.testing.assert_array_equal(g, w.numpy())


@pytest.mark.parametrize("backend", ["numpy", "xla"])
def test_integer_div_truncates_exactly_over_the_whole_int64_range(backend):
    """ONNX's Div of int64 truncates toward zero; float64 holds only 53 bits, so the import corrects the float
    quotient in int64 (``import_ops._integer_div``). 4,000 pairs of every magnitude and sign, and the edges."""
    if backend == "xla":
        require("jax")
    TensorProto, helper, _ = _onnx()
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 64, size=(2, 4000))
    x, y = (rng.integers(INT64_MIN, INT64_MAX, size=(2, 4000), dtype=np.int64, endpoint=True)
            >> np.minimum(bits, 63).astype(np.int64))
    y[y == 0] = 1
    edges = [(INT64_MAX, 1), (INT64_MAX, -1), (INT64_MIN, 1), (INT64_MIN, 2), (INT64_MIN, INT64_MIN),
             (INT64_MAX, INT64_MIN), (INT64_MIN + 1, INT64_MAX), (2 ** 53 + 1, 1), (-(2 ** 62) - 3, 3), (5, -7)]
    x = np.concatenate([x, [e[0] for e in edges]]).astype(np.int64)
    y = np.concatenate([y, [e[1] for e in edges]]).astype(np.int64)
    keep = ~((x == INT64_MIN) & (y == -1))  # the one quotient int64 cannot hold
    x, y = x[keep], y[keep]
    graph = helper.make_graph([helper.make_node("Div", ["x", "y"], ["q"])], "g",
                              [helper.make_tensor_value_info(n, TensorProto.INT64, [len(x)]) for n in "xy"],
                              [helper.make_tensor_value_info("q", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    from gradgen.framework import Executor
    from gradgen.framework.tools.onnx import import_onnx

    program, _, outputs = import_onnx(model)
    (got,) = Executor(backend=backend).run(program, feed={"x": x, "y": y}, fetch_list=list(outputs.values()))
    want = [abs(a) // abs(b) * (1 if (a >= 0) == (b > 0) else -1) for a, b in zip(x.tolist(), y.tolist())]
    wrong = [(a, b, g, w) for a, b, g, w in zip(x.tolist(), y.tolist(), got.tolist(), want) if g != w]
    assert not wrong, f"{len(wrong)} wrong quotients, e.g. {wrong[:5]}"


@pytest.mark.parametrize("v", VALUES, ids=["2**53+1", "-(2**53+1)", "INT64_MAX", "INT64_MIN"])
def test_an_integer_no_tensor_can_use_as_a_shape_or_index_is_refused_by_name(v):
    """Reshape, TopK and Gather given the same values: no tensor of 4 elements has such a dim, k or index, so the
    import (or, for an index gradgen reads only at run time, the run) is a gradgen error, never a wrapped or
    rounded number; Expand to [v, 4] is refused, or (2**53 + 1, which broadcasting allows) declares exactly it."""
    _, helper, _ = _onnx()
    from gradgen.framework.tools.onnx import import_onnx
    from gradgen.program.errors import GradgenError

    node = helper.make_node
    refused = {
        "Reshape": ([node("Reshape", ["x", "to"], ["y"])], [_tensor("to", [v, 4])]),
        "TopK": ([node("TopK", ["x", "k"], ["y", "i"])], [_tensor("k", [v])]),
        "Gather": ([node("Gather", ["x", "i"], ["y"])], [_tensor("i", [v, 0])]),
    }
    for name, (nodes, inits) in refused.items():
        with pytest.raises(GradgenError):
            _gradgen(_model(nodes, ["y"], inits), X, "numpy")
    try:
        program, _, outputs = import_onnx(_model([node("Expand", ["x", "to"], ["y"])], ["y"], [_tensor("to", [v, 4])]))
    except GradgenError:
        return
    assert program.global_block().var(outputs["y"]).shape == (v, 4)


@pytest.mark.parametrize("start,end", [(-1, 0), (0, 2 ** 63 - 1), (-2 ** 63, 1), (1, 2), (-1, None), (2 ** 40, None),
                                       (2 ** 40, 2 ** 40 + 1), (-2 ** 63, -2 ** 63 + 1)])
def test_a_shape_of_run_time_dims_with_start_and_end_is_onnx_s_slice_of_it(start, end):
    """Shape's start and end count from the back when negative and are clamped (INT64_MAX, INT64_MIN); the
    entries picked of a shape with a run-time dim are the ones ONNX Runtime gives (start=-1, end=0 is empty: it
    was once read as the last dim). Reshape(m, Concat(those entries, [-1])) shows which were picked."""
    TensorProto, helper, _ = _onnx()
    attrs = {"start": start} if end is None else {"start": start, "end": end}
    nodes = [helper.make_node("Shape", ["m"], ["s"], **attrs), helper.make_node("Concat", ["s", "rest"], ["to"], axis=0),
             helper.make_node("Reshape", ["m", "to"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("m", TensorProto.FLOAT, [None, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[_tensor("rest", [-1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m = np.arange(15, dtype=np.float32).reshape(5, 3)
    want = run_ort(model, {"m": m})["y"]
    got = _gradgen_fed(model, {"m": m})[0]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def _gradgen_fed(model, feed):
    from gradgen.framework import Executor, Scope
    from gradgen.framework.tools.onnx import import_onnx

    program, params, outputs = import_onnx(model)
    scope = Scope()
    for name, value in params.items():
        scope.set(name, value)
    return Executor(backend="numpy").run(program, feed=feed, fetch_list=list(outputs.values()), scope=scope)
