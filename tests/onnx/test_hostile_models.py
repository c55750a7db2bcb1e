"""The importer on hostile models: whatever the bytes, the result is a program or an OnnxImportError naming what
is wrong, never an exception of protobuf, onnx or numpy, and never an allocation or a loop the model's declared
sizes dictate."""
from __future__ import annotations

import re
import time

import numpy as np
import pytest

from tests.onnx.runtime import require


def _tools():
    require("onnx")
    from gradgen.framework import import_onnx
    from gradgen.framework.tools.onnx import OnnxImportError

    return import_onnx, OnnxImportError


def _model(nodes, inputs, outputs, inits=(), opset=17):
    from onnx import helper

    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _info(name, shape, elem=1):
    from onnx import helper

    return helper.make_tensor_value_info(name, elem, shape)


def _ints(name, values):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(values, np.int64), name)


def test_seeded_mutations_of_small_models_give_a_program_or_an_onnx_import_error():
    """Two thousand mutants of seventeen seed models (bytes cut, flipped and appended; inputs dropped, added and
    renamed; attrs of wrong kinds and extreme values; element types, dims, initializers and opsets changed;
    nodes copied and removed; the same in If and Loop bodies)."""
    import_onnx, OnnxImportError = _tools()
    from tests.onnx.hostile import mutants

    started, outcomes = time.perf_counter(), {"imported": 0, "refused": 0}
    for what, model in mutants(2000, seed=1):
        try:
            import_onnx(model)
            outcomes["imported"] += 1
        except OnnxImportError as e:
            assert str(e), what
            outcomes["refused"] += 1
        except Exception as e:  # the failure this test exists to catch
            pytest.fail(f"{what}: {type(e).__name__} escaped the importer: {e}")
    assert outcomes["imported"] > 100 and outcomes["refused"] > 1000, outcomes  # the mutants reach both ends
    assert time.perf_counter() - started < 60


@pytest.mark.parametrize("data,message", [
    (b"", "empty (0 bytes), not an ONNX model"),
    (bytes(range(7, 71)), "not an ONNX model (protobuf cannot decode it"),
    (b"\x08\x07", "the model has no graph outputs"),
], ids=["empty", "64 bytes of garbage", "a model of nothing"])
def test_a_file_that_is_no_model_is_an_error_not_an_empty_program(tmp_path, data, message):
    import_onnx, OnnxImportError = _tools()
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    with pytest.raises(OnnxImportError, match=re.escape(message)):
        import_onnx(path)
    with pytest.raises(OnnxImportError, match=re.escape(message)):
        import_onnx(data)


def test_nodes_that_break_their_onnx_schema_are_errors_naming_the_node():
    import_onnx, OnnxImportError = _tools()
    from onnx import helper

    x, y = _info("x", [2, 3]), _info("y", None)
    w = _ints("w", np.ones((3, 3)))
    cases = [
        (helper.make_node("Gemm", ["x"], ["y"], name="g"), r"node #0 'g' \(Gemm\): 1 inputs; Gemm takes 2 to 3"),
        (helper.make_node("Relu", ["x", "x"], ["y"], name="r"), r"node #0 'r' \(Relu\): 2 inputs; Relu takes 1"),
        (helper.make_node("Relu", ["x"], ["y", "z"], name="r"), r"'r' \(Relu\): 2 outputs; Relu makes 1"),
        (helper.make_node("Gemm", ["x", "w"], ["y"], name="g", alpha="big"),
         r"'g' \(Gemm\): attr 'alpha' is of kind STRING, Gemm takes FLOAT"),
        (helper.make_node("Relu", ["x"], ["y"], name="r", colour=1), r"'r' \(Relu\): unknown attr 'colour'"),
        (helper.make_node("Cast", ["x"], ["y"], name="c"), r"'c' \(Cast\): missing required attr\(s\) to"),
        (helper.make_node("Cast", ["x"], ["y"], name="c", to=0), r"'c' \(Cast\): element type 0 is not an ONNX"),
    ]
    for node, message in cases:
        with pytest.raises(OnnxImportError, match=message):
            import_onnx(_model([node], [x], [y], [w]))


def test_a_value_defined_twice_is_an_error():
    import_onnx, OnnxImportError = _tools()
    from onnx import helper

    x, y = _info("x", [2]), _info("y", None)
    twice = [helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Neg", ["x"], ["y"], name="b")]
    with pytest.raises(OnnxImportError, match=r"node #1 'b' \(Neg\): output 'y' is already defined"):
        import_onnx(_model(twice, [x], [y]))
    over_input = [helper.make_node("Relu", ["x"], ["x"], name="a")]
    with pytest.raises(OnnxImportError, match=r"node #0 'a' \(Relu\): output 'x' is already defined"):
        import_onnx(_model(over_input, [x], [x]))


@pytest.mark.parametrize("elem", [0, 23, 17], ids=["undefined", "an unknown number", "float8"])
def test_a_graph_input_of_an_element_type_gradgen_lacks_is_an_error(elem):
    import_onnx, OnnxImportError = _tools()
    from onnx import helper

    x = _info("x", [2])
    x.type.tensor_type.elem_type = elem
    with pytest.raises(OnnxImportError, match=r"graph input 'x': element type"):
        import_onnx(_model([helper.make_node("Relu", ["x"], ["y"])], [x], [_info("y", None)]))


def test_an_output_name_that_is_not_utf8_is_an_error_naming_the_node():
    import_onnx, OnnxImportError = _tools()
    from onnx import helper

    model = _model([helper.make_node("Relu", ["x"], ["yQ"], name="r")], [_info("x", [2])], [_info("yQ", None)])
    data = model.SerializeToString().replace(b"yQ", b"y\xff")
    with pytest.raises(OnnxImportError, match=r"model\.graph\.node\[0\] 'r' \(Relu\)\.output\[0\] is not UTF-8 text"):
        import_onnx(data)


@pytest.mark.parametrize("field", ["producer_name", "graph.doc_string", "graph.node[0].domain",
                                   "graph.node[0].attribute[0].name", "graph.initializer[0].name"])
def test_a_text_field_that_is_not_utf8_is_an_error_naming_the_field(field):
    """ONNX is proto2: its parser keeps a string field's bytes, so such a field reads back as bytes (a
    ``producer_name`` of bytes once escaped as a TypeError from the PyTorch-export check)."""
    import_onnx, OnnxImportError = _tools()
    from onnx import ModelProto, helper

    model = _model([helper.make_node("Gemm", ["x", "w"], ["y"], name="g", alpha=0.5)], [_info("x", [2, 3])],
                   [_info("y", None)], [_ints("w", np.ones((3, 2), np.int64))])
    model.producer_name = "pytorch"
    owner, name = field.rsplit(".", 1) if "." in field else ("", field)
    setattr(eval(f"model.{owner}") if owner else model, name, "QzMARKzQ")  # noqa: S307 - a fixed field path
    garbled = ModelProto()
    garbled.ParseFromString(model.SerializeToString().replace(b"QzMARKzQ", b"pyt\xff\xfe\xfdch"))
    where = re.escape(field).replace(r"node\[0\]", r"node\[0\] 'g' \(Gemm\)")
    with pytest.raises(OnnxImportError, match=rf"model\.{where} is not UTF-8 text"):
        import_onnx(garbled)


def test_an_attr_that_refers_to_a_function_attr_outside_a_function_is_an_error_naming_the_node():
    import_onnx, OnnxImportError = _tools()
    from onnx import helper

    attr = helper.make_attribute("alpha", 0.5)
    attr.ref_attr_name = "scale"
    node = helper.make_node("Gemm", ["x", "w"], ["y"], name="g")
    node.attribute.append(attr)
    model = _model([node], [_info("x", [2, 3])], [_info("y", None)], [_ints("w", np.ones((3, 2)))])
    with pytest.raises(OnnxImportError, match=r"node #0 'g' \(Gemm\): attr 'alpha' refers to 'scale'"):
        import_onnx(model)


def test_a_string_attr_that_is_not_utf8_is_an_error_naming_the_node():
    import_onnx, OnnxImportError = _tools()
    from onnx import helper

    node = helper.make_node("Conv", ["x", "k"], ["y"], name="c", auto_pad="SAME_UPPER")
    node.attribute[0].s = b"SAME\xff"
    model = _model([node], [_info("x", [1, 1, 4, 4])], [_info("y", None)],
                   [_ints("k", np.ones((1, 1, 3, 3)))])
    with pytest.raises(OnnxImportError, match=r"node #0 'c' \(Conv\): attr 'auto_pad' is not UTF-8 text"):
        import_onnx(model)


# -- memory bombs and endless loops ------------------------------------------------------------------------------------

def _constant_of_shape(dims):
    from onnx import helper

    node = helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill")
    return _model([node], [], [_info("y", None)], [_ints("s", dims)])


def test_constant_of_shape_larger_than_the_limit_is_an_error_that_names_the_limit():
    """A 107-byte model asking for 12000 x 12000 float32 (549 MB) used to make it at import."""
    import_onnx, OnnxImportError = _tools()
    model = _constant_of_shape([12000, 12000])
    assert len(model.SerializeToString()) < 120
    with pytest.raises(OnnxImportError, match=r"node #0 'fill' \(ConstantOfShape\): the filled tensor of shape "
                                              r"\[12000, 12000\] would take 576,000,000 bytes, over the import "
                                              r"limit of 268,435,456 \(import_onnx\(max_constant_bytes=...\)"):
        import_onnx(model)
    with pytest.raises(OnnxImportError, match="negative size"):
        import_onnx(_constant_of_shape([4, -3]))
    program, _, outputs = import_onnx(_constant_of_shape([4, 4]))  # 64 bytes: under the default limit
    with pytest.raises(OnnxImportError, match="over the import limit of 32"):
        import_onnx(_constant_of_shape([4, 4]), max_constant_bytes=32)


def test_a_strided_slice_or_last_index_argmax_over_a_huge_declared_dim_is_an_error_not_an_allocation():
    import_onnx, OnnxImportError = _tools()
    from onnx import TensorProto, helper

    huge = _info("x", [2 ** 40, 2])
    slice_ = helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"], name="s")
    inits = [_ints("st", [0]), _ints("en", [2 ** 62]), _ints("ax", [0]), _ints("sp", [2])]
    with pytest.raises(OnnxImportError, match=r"'s' \(Slice\): the index of a strided slice of shape "
                                              r"\[549755813888\] would take"):
        import_onnx(_model([slice_], [huge], [_info("y", None)], inits))
    argmax = helper.make_node("ArgMax", ["x"], ["y"], name="a", axis=0, select_last_index=1)
    with pytest.raises(OnnxImportError, match=r"'a' \(ArgMax\): the reversed index of select_last_index=1"):
        import_onnx(_model([argmax], [huge], [_info("y", None, TensorProto.INT64)]))


def test_a_loop_with_a_huge_trip_count_stops_at_the_import_limit_with_an_error():
    """Exporters write INT64_MAX as the trip count of a loop its condition ends; one that never ends is
    capped by ``max_loop_iterations`` (a run-time error), not run for 2^62 steps."""
    import_onnx, _ = _tools()
    from onnx import TensorProto, helper, numpy_helper

    from gradgen.framework import ExecutionError, Executor, Scope

    body = helper.make_graph(
        [helper.make_node("Add", ["v", "one"], ["v2"]), helper.make_node("Identity", ["c"], ["c2"])], "body",
        [_info("i", [], TensorProto.INT64), _info("c", [], TensorProto.BOOL), _info("v", [2])],
        [_info("c2", [], TensorProto.BOOL), _info("v2", [2])],
        initializer=[numpy_helper.from_array(np.ones(2, np.float32), "one")])
    node = helper.make_node("Loop", ["n", "", "x"], ["y"], name="loop", body=body)
    model = _model([node], [_info("x", [2])], [_info("y", None)], [_ints("n", 2 ** 62)])
    program, params, outputs = import_onnx(model, max_loop_iterations=50)
    scope = Scope()
    for name, value in params.items():
        scope.set(name, value)
    with pytest.raises(ExecutionError, match="max_iterations=50"):
        Executor().run(program, feed={"x": np.zeros(2, np.float32)}, fetch_list=[outputs["y"]], scope=scope)
    model.graph.initializer[0].CopyFrom(_ints("n", 7))
    program, params, outputs = import_onnx(model, max_loop_iterations=50)
    scope = Scope()
    for name, value in params.items():
        scope.set(name, value)
    (got,) = Executor().run(program, feed={"x": np.zeros(2, np.float32)}, fetch_list=[outputs["y"]], scope=scope)
    np.testing.assert_array_equal(got, np.full(2, 7.0, np.float32))


# -- the command -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("data,message", [
    (bytes(range(7, 71)), "not an ONNX model"), (b"", "empty (0 bytes)")], ids=["garbage", "empty"])
def test_the_command_reports_a_bad_model_in_one_line(tmp_path, data, message):
    require("onnx")
    from tests.cli.test_cli import gradgen

    (tmp_path / "m.onnx").write_bytes(data)
    result = gradgen("import-onnx", tmp_path / "m.onnx", "-o", tmp_path / "p.json")
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gradgen: error: ") and message in lines[0], result.stderr
    assert not (tmp_path / "p.json").exists()


def test_the_command_takes_the_limits_as_flags(tmp_path):
    require("onnx")
    from tests.cli.test_cli import gradgen

    (tmp_path / "m.onnx").write_bytes(_constant_of_shape([4, 4]).SerializeToString())
    result = gradgen("import-onnx", tmp_path / "m.onnx", "-o", tmp_path / "p.json", "--max-constant-bytes", "32")
    assert result.returncode == 1 and "over the import limit of 32" in result.stderr, result.stderr
    result = gradgen("import-onnx", tmp_path / "m.onnx", "-o", tmp_path / "p.json", "--max-loop-iterations", "9")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("op_type", ["Squeeze", "Slice"])
def test_an_axis_0_of_a_scalar_is_an_error_naming_the_node(op_type):
    """gradgen's axis rule lets a scalar have axis 0 (for reductions), which squeeze's and slice's shape
    inference then indexed: an IndexError escaped (found by the hostile run, seeds 12 and 0)."""
    import_onnx, OnnxImportError = _tools()
    from onnx import helper

    inputs = ["x", "ax"] if op_type == "Squeeze" else ["x", "ax", "ax", "ax"]
    model = _model([helper.make_node(op_type, inputs, ["y"], name="n")], [_info("x", [])], [_info("y", None)],
                   [_ints("ax", [0])])
    with pytest.raises(OnnxImportError, match=rf"node #0 'n' \({op_type}\): axis 0 is out of range for rank 0"):
        import_onnx(model)


def test_a_max_over_axis_0_of_a_scalar_imports_as_gradgen_reads_it():
    """ReduceMax of a scalar with axes [0] checked the axis for emptiness by indexing a shape of no dims (an
    IndexError escaped); a scalar's axis 0 is gradgen's "nothing to reduce", as ReduceSum's already was."""
    import_onnx, _ = _tools()
    from onnx import helper

    model = _model([helper.make_node("ReduceMax", ["x"], ["y"], axes=[0])], [_info("x", [])], [_info("y", None)])
    program, _, outputs = import_onnx(model)
    assert program.global_block().var(outputs["y"]).shape == ()


def test_a_reshape_of_opset_1_takes_its_shape_attr_or_is_an_error_naming_the_node():
    """Reshape before opset 5 has one input and the shape as an attr; its second input was read regardless (an
    IndexError escaped when a mutant moved a model to opset 1)."""
    import_onnx, OnnxImportError = _tools()
    from onnx import helper

    reshape = helper.make_node("Reshape", ["x"], ["y"], name="r", shape=[3, 2])
    program, _, outputs = import_onnx(_model([reshape], [_info("x", [2, 3])], [_info("y", None)], opset=1))
    assert program.global_block().var(outputs["y"]).shape == (3, 2)
    with pytest.raises(OnnxImportError, match=r"node #0 'r' \(Reshape\): missing attr 'shape'"):
        import_onnx(_model([helper.make_node("Reshape", ["x"], ["y"], name="r")], [_info("x", [2, 3])],
                           [_info("y", None)], opset=1))


def test_a_top_k_of_opset_1_takes_its_k_attr():
    """TopK before opset 10 has K as an attr; its absent second input was read (an IndexError escaped)."""
    import_onnx, _ = _tools()
    from onnx import helper

    top = helper.make_node("TopK", ["x"], ["v", "i"], name="t", k=2, axis=1)
    program, _, outputs = import_onnx(_model([top], [_info("x", [2, 3])], [_info("v", None), _info("i", None, 7)],
                                             opset=1))
    assert program.global_block().var(outputs["v"]).shape == (2, 2)


def test_a_reshape_with_allowzero_imports_unless_a_zero_in_its_shape_means_a_zero_size_dim():
    """allowzero=1 (the exporter's reshape_as) changes only what a 0 in the shape means: without one the node is an
    ordinary Reshape; with one it asks for a zero-size dim, which gradgen's reshape (0 copies X's dim) cannot say."""
    import_onnx, OnnxImportError = _tools()
    from onnx import helper

    def reshape_to(shape):
        node = helper.make_node("Reshape", ["x", "to"], ["y"], name="r", allowzero=1)
        return _model([node], [_info("x", [2, 3])], [_info("y", None)], [_ints("to", shape)])

    program, _, outputs = import_onnx(reshape_to([3, 2]))
    assert program.global_block().var(outputs["y"]).shape == (3, 2)
    with pytest.raises(OnnxImportError, match=r"node #0 'r' \(Reshape\): allowzero=1 with a 0 in the shape"):
        import_onnx(reshape_to([0, 3]))
