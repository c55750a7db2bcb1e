"""Hostile ONNX input for the importer: small valid seed models made with ``onnx.helper``, and seeded mutations of
them (their bytes, their nodes, attrs, types, shapes and initializers), as a fuzzer would make them.

    python -m tests.onnx.hostile [N [SEED]]   # import N mutants; list what escaped other than OnnxImportError
                                              # and count the imported, refused and escaped
"""
from __future__ import annotations

import functools
import random
import sys
from collections import Counter

import numpy as np


def _models():
    from onnx import TensorProto, helper, numpy_helper

    f, i64 = TensorProto.FLOAT, TensorProto.INT64

    def info(name, elem, shape):
        return helper.make_tensor_value_info(name, elem, shape)

    def model(nodes, inputs, outputs, inits=(), opset=17):
        graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])

    def const(name, values, dtype=np.int64):
        return numpy_helper.from_array(np.asarray(values, dtype), name)

    x23, y = info("x", f, [2, 3]), info("y", f, None)
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4) / 10, "w")
    b = numpy_helper.from_array(np.ones(4, np.float32), "b")
    node = helper.make_node
    body = helper.make_graph(
        [node("Add", ["v", "one"], ["v2"]), node("Identity", ["c"], ["c2"])], "body",
        [info("i", i64, []), info("c", TensorProto.BOOL, []), info("v", f, [2, 3])],
        [info("c2", TensorProto.BOOL, []), info("v2", f, [2, 3])],
        initializer=[numpy_helper.from_array(np.ones((2, 3), np.float32), "one")])
    then = helper.make_graph([node("Relu", ["x"], ["t"])], "then", [], [info("t", f, [2, 3])])
    other = helper.make_graph([node("Neg", ["x"], ["e"])], "else", [], [info("e", f, [2, 3])])
    return {
        "gemm": model([node("Gemm", ["x", "w", "b"], ["y"], name="gemm", alpha=0.5, transB=0)], [x23], [y], [w, b]),
        "mlp": model([node("MatMul", ["x", "w"], ["h"], name="mm"), node("Add", ["h", "b"], ["a"], name="add"),
                      node("Relu", ["a"], ["r"], name="relu"), node("ReduceSum", ["r", "axes"], ["y"], name="sum",
                                                                     keepdims=0)],
                     [x23], [y], [w, b, const("axes", [1])]),
        "reshape": model([node("Reshape", ["x", "shape"], ["r"], name="reshape"),
                          node("Transpose", ["r"], ["t"], name="transpose", perm=[1, 0]),
                          node("Softmax", ["t"], ["y"], name="softmax", axis=-1)],
                         [x23], [y], [const("shape", [3, 2])]),
        "slice": model([node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"], name="slice")],
                       [x23], [y], [const("starts", [2]), const("ends", [-4]), const("axes", [1]),
                                    const("steps", [-2])]),
        "concat_split": model([node("Concat", ["x", "x"], ["c"], name="concat", axis=0),
                               node("Split", ["c", "sizes"], ["y", "z"], name="split", axis=0)],
                              [x23], [y, info("z", f, None)], [const("sizes", [1, 3])]),
        "argmax": model([node("ArgMax", ["x"], ["y"], name="argmax", axis=1, keepdims=1, select_last_index=1)],
                        [x23], [info("y", i64, None)]),
        "constant_of_shape": model([node("Constant", [], ["s"], name="shape", value=const("v", [2, 3])),
                                    node("ConstantOfShape", ["s"], ["c"], name="fill",
                                         value=numpy_helper.from_array(np.array([1.5], np.float32), "v")),
                                    node("Mul", ["x", "c"], ["y"], name="mul")], [x23], [y]),
        "conv": model([node("Conv", ["img", "k"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[1, 1]),
                       node("MaxPool", ["c"], ["y"], name="pool", kernel_shape=[2, 2], strides=[2, 2])],
                      [info("img", f, [1, 2, 4, 4])], [y],
                      [numpy_helper.from_array(np.ones((3, 2, 3, 3), np.float32), "k")]),
        "gather_cast": model([node("Gather", ["x", "idx"], ["g"], name="gather", axis=1),
                              node("Cast", ["g"], ["y"], name="cast", to=TensorProto.DOUBLE)],
                             [x23], [info("y", TensorProto.DOUBLE, None)], [const("idx", [0, 2])]),
        "where_clip": model([node("Greater", ["x", "zero"], ["m"], name="gt"),
                             node("Where", ["m", "x", "zero"], ["p"], name="where"),
                             node("Clip", ["p", "lo", "hi"], ["y"], name="clip")], [x23], [y],
                            [const("zero", 0.0, np.float32), const("lo", 0.1, np.float32),
                             const("hi", 0.9, np.float32)]),
        "if": model([node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
                     node("Greater", ["s", "zero"], ["p"], name="gt"),
                     node("If", ["p"], ["y"], name="if", then_branch=then, else_branch=other)],
                    [x23], [y], [const("zero", 0.0, np.float32)]),
        "loop": model([node("Loop", ["n", "", "x"], ["y"], name="loop", body=body)], [x23], [y], [const("n", 3)]),
        "expand_unsqueeze": model([node("Unsqueeze", ["x", "ax"], ["u"], name="unsqueeze"),
                                   node("Expand", ["u", "to"], ["e"], name="expand"),
                                   node("Squeeze", ["e", "ax"], ["y"], name="squeeze")], [x23], [y],
                                  [const("ax", [0]), const("to", [1, 2, 3])]),
        "shape_arithmetic": model([node("Shape", ["x"], ["s"], name="shape"),
                                   node("Gather", ["s", "one"], ["d"], name="gather", axis=0),
                                   node("Mod", ["d", "two"], ["m"], name="mod"),
                                   node("Add", ["m", "d"], ["n"], name="add"),
                                   node("Unsqueeze", ["n", "ax"], ["u"], name="unsqueeze"),
                                   node("Concat", ["u", "minus_one"], ["to"], name="concat", axis=0),
                                   node("Reshape", ["x", "to"], ["y"], name="reshape")], [x23], [y],
                                  [const("one", 1), const("two", 2), const("ax", [0]), const("minus_one", [-1])]),
        "scalar": model([node("Unsqueeze", ["s", "ax"], ["u"], name="unsqueeze"),
                         node("Softmax", ["u"], ["p"], name="softmax", axis=0),
                         node("ReduceMax", ["p"], ["y"], name="max", axes=[0], keepdims=0)],
                        [info("s", f, [])], [y], [const("ax", [0])]),
        "new_entries": model([node("Shape", ["x"], ["s"], name="shape", start=0),
                              node("Gather", ["s", "one"], ["n"], name="gather", axis=0),
                              node("Range", ["zero", "n", "one"], ["r"], name="range"),
                              node("Abs", ["r"], ["a"], name="abs"), node("Cast", ["a"], ["af"], name="cast", to=f),
                              node("IsNaN", ["x"], ["nan"], name="isnan"),
                              node("Where", ["nan", "x", "af"], ["w"], name="where"),
                              node("Trilu", ["w", "k"], ["t"], name="trilu", upper=0),
                              node("ReduceL2", ["t"], ["y"], name="l2", axes=[1])],
                             [info("x", f, [3, None])], [y],
                             [const("zero", 0), const("one", 1), const("k", 2 ** 62)]),
        "run_time_shape": model([node("Shape", ["x"], ["s"], name="shape"),
                                 node("Gather", ["s", "zero"], ["b"], name="gather", axis=0),
                                 node("Unsqueeze", ["b", "ax"], ["u"], name="unsqueeze"),
                                 node("Slice", ["s", "one", "two"], ["rest"], name="slice"),
                                 node("Mul", ["rest", "one"], ["cols"], name="mul"),
                                 node("Concat", ["u", "cols"], ["to"], name="concat", axis=0),
                                 node("Cast", ["to"], ["to64"], name="cast", to=i64),
                                 node("Reshape", ["x", "to64"], ["y"], name="reshape")], [info("x", f, [None, 3])],
                                [y], [const("zero", 0), const("one", [1]), const("two", [2]), const("ax", [0])]),
    }


@functools.lru_cache(maxsize=None)
def seeds() -> dict:
    """The seed models by name (made once: mutants are copies)."""
    return _models()


_BIG = [0, -1, 1, 2, 3, -7, 2 ** 31, 2 ** 62, -(2 ** 63), 12000, 2 ** 63 - 1, 2 ** 53 + 1, -(2 ** 31) - 1]

_TEXT_FIELDS = ("producer_name", "producer_version", "domain", "doc_string", "graph.name", "graph.doc_string",
                "node.name", "node.op_type", "node.domain", "node.doc_string", "node.input", "node.output",
                "attr.name", "attr.s", "attr.doc_string", "input.name", "output.name", "init.name")
"""Text fields of a model that a mutant may fill with bytes that are not UTF-8 (``_garble_text``)."""

_MARK = "QzMARKzQ"


def _random_attr(rng: random.Random, name: str, declared=None):
    """An attr ``name`` with a random value: half the time of the kind its schema declares (``declared``, an
    AttrType), so that the value reaches the import function; otherwise of any kind."""
    from onnx import AttributeProto, TensorProto, helper, numpy_helper

    if declared is not None and rng.random() < 0.5:
        kind = {AttributeProto.INT: 0, AttributeProto.FLOAT: 1, AttributeProto.STRING: 2, AttributeProto.INTS: 3,
                AttributeProto.TENSOR: 4, AttributeProto.FLOATS: 5}.get(int(declared), 6)
    else:
        kind = rng.randrange(7)
    if kind == 0:
        return helper.make_attribute(name, rng.choice(_BIG))
    if kind == 1:
        return helper.make_attribute(name, rng.choice([0.5, float("nan"), -1e30]))
    if kind == 2:
        return helper.make_attribute(name, rng.choice(["", "NOTSET", "SAME_UPPER", "\u00e9", "x" * 40]))
    if kind == 3:
        return helper.make_attribute(name, [rng.choice(_BIG) for _ in range(rng.randrange(1, 6))])
    if kind == 4:
        return helper.make_attribute(name, numpy_helper.from_array(np.array([rng.choice(_BIG)] * rng.randrange(3),
                                                                            np.int64)))
    if kind == 5:
        return helper.make_attribute(name, [0.5, 2.0])
    attr = helper.make_attribute(name, 1)
    attr.type = rng.choice([0, 5, 11, TensorProto.UNDEFINED])  # a type that does not match the value
    return attr


def _mutate_proto(model, rng: random.Random) -> None:
    """One structural change to ``model`` (in place)."""
    from onnx import numpy_helper

    graph = model.graph
    nodes = list(graph.node)
    names = [n for nd in nodes for n in list(nd.input) + list(nd.output)] + [i.name for i in graph.input] or ["x"]
    node = rng.choice(nodes) if nodes else None
    kind = rng.randrange(24)
    if kind == 0 and node is not None and len(node.input):
        del node.input[rng.randrange(len(node.input))]
    elif kind == 1 and node is not None:
        node.input.append(rng.choice(names + ["", "undefined"]))
    elif kind == 2 and node is not None and len(node.input):
        node.input[rng.randrange(len(node.input))] = rng.choice(names + ["", "nowhere"])
    elif kind == 3 and node is not None:
        node.output.append(rng.choice(names))  # often a name defined already
    elif kind == 4 and node is not None and len(node.output):
        node.output[rng.randrange(len(node.output))] = rng.choice(names + [""])
    elif kind == 5 and node is not None and len(node.attribute):
        del node.attribute[rng.randrange(len(node.attribute))]
    elif kind == 6 and node is not None:
        declared = _declared_attrs(node.op_type, model.opset_import[0].version)
        name = rng.choice([a.name for a in node.attribute] + sorted(declared) + ["axis", "perm", "to", "value"])
        kept = [a for a in node.attribute if a.name != name]
        del node.attribute[:]
        node.attribute.extend(kept + [_random_attr(rng, name, declared.get(name))])
    elif kind == 7 and node is not None:
        node.op_type = rng.choice(_op_types())
    elif kind == 8 and len(graph.input) + len(graph.output):
        target = rng.choice(list(graph.input) + list(graph.output))
        target.type.tensor_type.elem_type = rng.choice([0, 8, 14, 16, 17, 23, 99])
    elif kind == 9 and len(graph.input):
        dims = graph.input[rng.randrange(len(graph.input))].type.tensor_type.shape.dim
        if len(dims):
            dims[rng.randrange(len(dims))].dim_value = rng.choice(_BIG)
        else:
            dims.add().dim_value = rng.choice(_BIG)
    elif kind == 10 and len(graph.initializer):
        init = graph.initializer[rng.randrange(len(graph.initializer))]
        if rng.random() < 0.5 and len(init.dims):
            init.dims[rng.randrange(len(init.dims))] = rng.choice(_BIG)
        else:
            init.data_type = rng.choice([0, 1, 3, 7, 8, 9, 11, 99])
    elif kind == 11 and len(graph.initializer):
        init = graph.initializer[rng.randrange(len(graph.initializer))]
        value = np.array([rng.choice(_BIG) for _ in range(rng.randrange(1, 4))], np.int64)
        init.CopyFrom(numpy_helper.from_array(value, init.name))
    elif kind == 12:
        model.opset_import[0].version = rng.choice([1, 6, 9, 10, 11, 12, 13, 25, 999])
    elif kind == 13 and node is not None:
        graph.node.append(type(node)())
        graph.node[-1].CopyFrom(node)  # the same outputs defined twice
    elif kind == 14 and nodes:
        del graph.node[rng.randrange(len(nodes))]
    elif kind == 15 and len(graph.output):
        graph.output[rng.randrange(len(graph.output))].name = rng.choice(names + ["never"])
    elif kind == 16 and len(graph.input):
        del graph.input[rng.randrange(len(graph.input))].type.tensor_type.shape.dim[:]
    elif kind == 18 and node is not None and len(node.attribute):
        node.attribute[rng.randrange(len(node.attribute))].ref_attr_name = rng.choice(["alpha", "", "\u00e9", "x"])
    elif kind == 19 and node is not None:
        node.domain = rng.choice(["ai.onnx", "ai.onnx.ml", "com.microsoft", "\u00e9", "x" * 300, " "])
    elif kind == 20 and node is not None:
        ints = [a for a in node.attribute if a.type in (a.INT, a.INTS)]
        if ints:
            a = rng.choice(ints)
            huge = [2 ** 63 - 1, -(2 ** 63), 2 ** 53 + 1, -1, -(2 ** 31), 2 ** 31, 2 ** 32 + 1]
            if a.type == a.INT:
                a.i = rng.choice(huge)
            else:
                del a.ints[:]
                a.ints.extend(rng.choice(huge) for _ in range(rng.randrange(1, 5)))
    elif kind == 21 and node is not None:
        attr = node.attribute.add()  # an attr whose declared type and value disagree, or of no type at all
        attr.name = rng.choice(["axis", "perm", "to", "value", "alpha", "keepdims", ""])
        attr.type = rng.choice([1, 2, 3, 4, 5, 6, 7, 8, 11, 13, 0])
        if rng.random() < 0.5:
            attr.s = rng.choice([b"abc", b"\xff\xfe", b""])
        else:
            attr.floats.extend([1.0, float("nan")])
    elif kind == 22:
        model.producer_name = rng.choice(["pytorch", "PyTorch", "", "\u00e9" * 50, "tf2onnx"])
        model.doc_string = rng.choice(["", "x" * 1000, "\u00e9"])
        model.graph.doc_string = rng.choice(["", "\u00e9"])
    elif kind == 23 and node is not None:
        func = model.functions.add()  # a model-local function named like a node's op (gradgen does not inline them)
        func.name, func.domain = node.op_type, rng.choice(["", "custom"])
        func.input.extend(list(node.input))
        func.output.extend(list(node.output))
        func.node.add().CopyFrom(node)
        if rng.random() < 0.5:
            node.domain = func.domain
    elif node is not None:
        for a in node.attribute:
            if a.type == a.GRAPH:
                sub = type(model)()
                sub.graph.CopyFrom(a.g)
                sub.opset_import.extend(model.opset_import)
                _mutate_proto(sub, rng)
                a.g.CopyFrom(sub.graph)


def _declared_attrs(op_type: str, opset: int) -> dict:
    """Attr name -> AttrType in ONNX's schema of ``op_type`` (empty for an op ONNX lacks at ``opset``)."""
    from onnx import defs

    try:
        return {name: spec.type for name, spec in defs.get_schema(op_type, opset, "").attributes.items()}
    except defs.SchemaError:
        return {}


def _op_types() -> list[str]:
    from gradgen.framework.tools.onnx.import_table import IMPORTERS

    return sorted(IMPORTERS)


def _mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    kind = rng.randrange(4)
    if kind == 0:
        return data[:rng.randrange(len(data) + 1)]
    if kind == 1:
        out = bytearray(data)
        for _ in range(rng.randrange(1, 8)):
            out[rng.randrange(len(out))] = rng.randrange(256)
        return bytes(out)
    if kind == 2:
        return bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 64, 300])))
    return data + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 32)))


def _garble_text(model, rng: random.Random):
    """``model`` with one text field holding bytes that are not UTF-8 (as a file may: ONNX is proto2, whose parser
    keeps such bytes, and reading the field gives ``bytes``), or None when the chosen field is not there."""
    from onnx import ModelProto

    graph = model.graph
    field = rng.choice(_TEXT_FIELDS)
    owner, _, name = field.rpartition(".")
    nodes, attrs = list(graph.node), [a for nd in graph.node for a in nd.attribute]
    target = {"": model, "graph": graph, "node": rng.choice(nodes) if nodes else None,
              "attr": rng.choice(attrs) if attrs else None,
              "input": rng.choice(graph.input) if len(graph.input) else None,
              "output": rng.choice(graph.output) if len(graph.output) else None,
              "init": rng.choice(graph.initializer) if len(graph.initializer) else None}[owner]
    if target is None:
        return None
    if name in ("input", "output"):
        values = getattr(target, name)
        if not len(values):
            return None
        values[rng.randrange(len(values))] = _MARK
    else:
        setattr(target, name, _MARK.encode() if name == "s" else _MARK)
    garbled = ModelProto()
    garbled.ParseFromString(model.SerializeToString().replace(_MARK.encode(), rng.choice(
        [b"\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8", b"pytorch\xc3", b"\xed\xa0\x80abcde"])))
    return garbled


def mutants(n: int, seed: int = 0):
    """``n`` hostile inputs: (what was done, a ModelProto or the bytes of a file)."""
    from onnx import ModelProto

    rng = random.Random(seed)
    models = seeds()
    names = sorted(models)
    for k in range(n):
        name = names[k % len(names)]
        if rng.random() < 0.25:
            yield f"{name}: bytes", _mutate_bytes(models[name].SerializeToString(), rng)
            continue
        model = ModelProto()
        model.CopyFrom(models[name])
        changes = rng.randrange(1, 4)
        for _ in range(changes):
            _mutate_proto(model, rng)
        if rng.random() < 0.1:
            garbled = _garble_text(model, rng)
            if garbled is not None:
                yield f"{name}: {changes} changes, text not UTF-8", garbled
                continue
        yield f"{name}: {changes} changes", model


def escapes(n: int, seed: int = 0, path: str = "/tmp/hostile.onnx", outcomes: Counter | None = None) -> Counter:
    """Import ``n`` mutants; count the exceptions other than OnnxImportError by type and raise site (and, in
    ``outcomes`` if given, how many were imported, refused and escaped)."""
    import traceback
    import warnings

    from gradgen.framework import import_onnx
    from gradgen.framework.tools.onnx import OnnxImportError

    found: Counter = Counter()
    outcomes = Counter() if outcomes is None else outcomes
    for what, model in mutants(n, seed):
        if isinstance(model, bytes):
            with open(path, "wb") as f:
                f.write(model)
            model = path
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                import_onnx(model)
            outcomes["imported"] += 1
        except OnnxImportError:
            outcomes["refused"] += 1
        except Exception as e:  # noqa: BLE001 - what the fuzzer is looking for
            outcomes["escaped"] += 1
            frame = traceback.extract_tb(e.__traceback__)[-1]
            found[f"{type(e).__name__} at {frame.filename.split('/')[-1]}:{frame.lineno} ({what}): "
                  f"{str(e)[:120]}"] += 1
    return found


if __name__ == "__main__":
    counts: Counter = Counter()
    n, seed = (int(sys.argv[1]) if len(sys.argv) > 1 else 300), (int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    for line, count in escapes(n, seed, outcomes=counts).most_common():
        print(f"{count:5d}  {line}")
    print(f"{n} mutants (seed {seed}): {counts['imported']} imported, {counts['refused']} refused, "
          f"{counts['escaped']} escaped")
