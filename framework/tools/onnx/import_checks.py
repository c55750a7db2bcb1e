"""What the importer checks before it trusts an ONNX model: the file parses, each node matches its ONNX schema
(arity, attr names and kinds), every value is defined once, element types and tensors decode, and no tensor the
import would make is larger than a limit.

A model file is hostile input: every failure here is an ``OnnxImportError`` (or ``NotImportable``, which the
importer turns into one naming the node), never an exception of protobuf, onnx or numpy.
"""
from __future__ import annotations

import functools
import math
import os

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import defs, helper, numpy_helper

from gradgen.program.dtypes import DTYPES

from .errors import NotImportable, OnnxImportError
from .limits import ImportLimits

__all__ = ["load_model", "check_text", "check_opset", "check_node", "check_defined_once", "numpy_dtype",
           "tensor_value", "check_size", "written_decimal"]


def load_model(source) -> onnx.ModelProto:
    """A ModelProto from a ModelProto, a path, or the bytes of a file; an OnnxImportError for anything else
    (a missing or empty file, bytes that do not parse, a model without a graph or outputs)."""
    if isinstance(source, onnx.ModelProto):
        model = source
    elif isinstance(source, (bytes, bytearray)):
        model = _parse(bytes(source), "the model bytes")
    elif isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise OnnxImportError(f"{path}: cannot read the model file: {e.strerror or e}") from None
        model = _parse(data, path)
        if any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer):
            try:
                onnx.external_data_helper.load_external_data_for_model(model, os.path.dirname(path) or ".")
            except (OSError, ValueError, onnx.checker.ValidationError) as e:
                raise OnnxImportError(f"{path}: cannot read the model's external data: {e}") from None
    else:
        raise OnnxImportError(f"import_onnx needs an onnx.ModelProto, a path or bytes, got {type(source).__name__}")
    if not model.HasField("graph") or not model.graph.output:
        raise OnnxImportError("the model has no graph outputs (an empty or truncated model file?)")
    check_text(model, "model")
    return model


def check_text(message, where: str) -> None:
    """OnnxImportError naming the field if a text field of ``message`` or of any message in it is not UTF-8.

    ONNX's messages are proto2, whose parser keeps a string field's bytes as they are in the file: a
    ``producer_name`` or node name of bytes that are not UTF-8 reads back as ``bytes``, not ``str``, and would
    break any code that treats it as text."""
    for field, value in message.ListFields():
        if field.type not in (field.TYPE_STRING, field.TYPE_MESSAGE):
            continue
        repeated = _repeated(field)
        for k, item in enumerate(value if repeated else [value]):
            at = f"{where}.{field.name}" + (f"[{k}]" if repeated else "")
            if field.type == field.TYPE_MESSAGE:
                if field.message_type.name == "NodeProto" and isinstance(item.name, str) and isinstance(
                        item.op_type, str):
                    at += f" '{item.name}' ({item.op_type})"  # the node as the importer's errors name it
                check_text(item, at)
            elif not isinstance(item, str):
                raise OnnxImportError(f"{at} is not UTF-8 text: {bytes(item)[:40]!r}")


def _repeated(field) -> bool:
    """Whether a protobuf field is repeated (``is_repeated`` from protobuf 6 on, ``label`` before)."""
    repeated = getattr(field, "is_repeated", None)
    return repeated if repeated is not None else field.label == field.LABEL_REPEATED


def _parse(data: bytes, where: str) -> onnx.ModelProto:
    if not data:
        raise OnnxImportError(f"{where}: empty (0 bytes), not an ONNX model")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as e:
        raise OnnxImportError(f"{where}: not an ONNX model (protobuf cannot decode it: {e})") from None
    return model


def check_opset(model) -> int:
    """The model's default-domain opset, which the installed onnx must know (its schemas check the nodes)."""
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    opset = versions[0] if versions else 1
    newest = defs.onnx_opset_version()
    if len(versions) > 1 or not 1 <= opset <= newest:
        raise OnnxImportError(f"opset import {versions}: the importer reads one default-domain opset from 1 to "
                              f"{newest} (the installed onnx package's newest)")
    return opset


@functools.lru_cache(maxsize=None)
def _schema(op_type: str, opset: int, domain: str):
    """(min inputs, max inputs, min outputs, max outputs, attr name -> (kind, required)) of ONNX's schema, or
    None where ONNX has no such op; cached, as reading a schema from onnx.defs costs more than the check."""
    try:
        schema = defs.get_schema(op_type, opset, domain)
    except defs.SchemaError:
        return None
    attrs = {name: (int(spec.type), spec.required) for name, spec in schema.attributes.items()}
    return schema.min_input, schema.max_input, schema.min_output, schema.max_output, attrs


def check_node(node, opset: int) -> None:
    """NotImportable unless ``node`` matches its ONNX schema at ``opset``: input and output counts, each attr
    known and of its declared kind, every required attr present."""
    schema = _schema(node.op_type, opset, node.domain)
    if schema is None:
        raise NotImportable(f"ONNX has no {node.op_type} in opset {opset}")
    min_in, max_in, min_out, max_out, known = schema
    n_in, n_out = len(node.input), len(node.output)
    if not min_in <= n_in <= max_in:
        raise NotImportable(f"{n_in} inputs; {node.op_type} takes {_range(min_in, max_in)}")
    if not min_out <= n_out <= max_out:
        raise NotImportable(f"{n_out} outputs; {node.op_type} makes {_range(min_out, max_out)}")
    seen = set()
    for attr in node.attribute:
        spec = known.get(attr.name)
        if spec is None:
            raise NotImportable(f"unknown attr '{attr.name}' (valid: {', '.join(sorted(known)) or 'none'})")
        if attr.name in seen:
            raise NotImportable(f"attr '{attr.name}' given twice")
        seen.add(attr.name)
        if attr.ref_attr_name:
            raise NotImportable(f"attr '{attr.name}' refers to '{attr.ref_attr_name}', an attr of an enclosing "
                                "function (only a function body may refer; the importer reads a graph)")
        if attr.type != spec[0]:
            raise NotImportable(f"attr '{attr.name}' is of kind {_kind(attr.type)}, {node.op_type} takes "
                                f"{_kind(spec[0])}")
    missing = [name for name, (_, required) in known.items() if required and name not in seen]
    if missing:
        raise NotImportable(f"missing required attr(s) {', '.join(missing)}")


def _range(low: int, high: int) -> str:
    return f"{low}" if low == high else f"{low} or more" if high >= 2 ** 31 - 1 else f"{low} to {high}"


def _kind(attr_type) -> str:
    try:
        return onnx.AttributeProto.AttributeType.Name(int(attr_type))
    except ValueError:
        return f"#{int(attr_type)}"


def check_defined_once(node, defined: set[str]) -> None:
    """NotImportable if an output of ``node`` names a value already defined (ONNX graphs are in SSA form: a
    second definition would silently replace the first); adds the outputs to ``defined``."""
    for name in node.output:
        if not name:
            continue  # an optional output left out
        if name in defined:
            raise NotImportable(f"output '{name}' is already defined (by a node, graph input or initializer)")
        defined.add(name)


def numpy_dtype(elem_type: int) -> str:
    """The gradgen dtype of an ONNX element type; NotImportable for one gradgen lacks or ONNX does not define."""
    try:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(int(elem_type))).name
    except (KeyError, TypeError, ValueError):
        raise NotImportable(f"element type {elem_type} is not an ONNX tensor type") from None
    if dtype not in DTYPES:
        raise NotImportable(f"element type {dtype} (gradgen has {', '.join(DTYPES)})")
    return dtype


def tensor_value(tensor, what: str) -> np.ndarray:
    """The array a TensorProto holds (an initializer, a Constant's value); NotImportable when it does not decode.

    Its values are in the file (no limit: a model's weights may be large), so a tensor whose dims promise more
    than its data holds fails to decode rather than allocate."""
    if not all(d >= 0 for d in tensor.dims):
        raise NotImportable(f"{what} has negative dims {list(tensor.dims)}")
    numpy_dtype(tensor.data_type)
    try:
        return numpy_helper.to_array(tensor)
    except (ValueError, TypeError, KeyError, IndexError) as e:
        raise NotImportable(f"{what} does not decode: {e}") from None


def check_size(dims, itemsize: int, what: str, limits: ImportLimits) -> None:
    """NotImportable if a tensor of ``dims`` would be larger than ``limits.max_constant_bytes`` (or has a
    negative dim)."""
    if any(d < 0 for d in dims):
        raise NotImportable(f"{what} of shape {list(dims)}: a negative size")
    size = math.prod(int(d) for d in dims) * itemsize
    if size > limits.max_constant_bytes:
        raise NotImportable(f"{what} of shape {list(dims)} would take {size:,} bytes, over the import limit of "
                            f"{limits.max_constant_bytes:,} (import_onnx(max_constant_bytes=...), gradgen "
                            "import-onnx --max-constant-bytes)")


def written_decimal(value: float) -> float:
    """A float32 as the shortest decimal that float32 reads back as it: the value an exporter wrote (0.9, 1e-5,
    a dropout's 0.3), not its float32 neighbour (0.8999999762), which would move a float64 model's results in the
    eighth digit. A float32 model computes with the same float32 either way."""
    return float(str(np.float32(value)))
