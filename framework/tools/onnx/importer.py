"""ONNX model -> gradgen program and parameter values.

Graph inputs become data vars; initializers that ops use as data become persistable parameters
(trainable when they are floats), so a user can ``append_backward`` to an imported model and
fine-tune it. Inputs that gradgen keeps as attrs (shapes, axes, split sizes, pads) must be
constants: initializers, ``Constant`` nodes, graph inputs frozen with ``constants=``, or the outputs of
nodes whose inputs all are (folded at import, ``import_fold``). Each node is translated by the
function its op type has in ``import_table.IMPORTERS``; ``If`` and ``Loop`` become ``cond`` and
``while`` with sub-blocks built from their subgraphs.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any, Iterator, Mapping

import numpy as np
import onnx
from onnx import helper

from gradgen.program import Program, program_guard
from gradgen.program.dtypes import DTYPES
from gradgen.program.errors import GradgenError
from gradgen.program.ops import OP_SCHEMAS
from gradgen.program.ops.network import RUNNING_VARIANCES

from . import import_table, import_windows
from .errors import NotImportable, OnnxImportError
from .import_dims import ShapeVector, evaluate as evaluate_shape_vector
from .import_fold import fold, foldable
from .import_nn import default_running_variance
from .import_checks import (check_defined_once, check_node, check_opset, load_model, numpy_dtype, tensor_value,
                            written_decimal)
from .limits import ImportLimits

__all__ = ["import_onnx", "unsupported_nodes", "NodeContext"]


def _dtype_of(value: np.ndarray) -> str:
    """The gradgen dtype of a constant's array (numpy's dtype names are gradgen's)."""
    if value.dtype.name not in DTYPES:
        raise NotImportable(f"a constant of element type {value.dtype.name} (gradgen has {', '.join(DTYPES)})")
    return value.dtype.name


def _shape(value_info) -> tuple[int, ...] | None:
    t = value_info.type.tensor_type
    if not t.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim)


def _attr_value(attr) -> Any:
    """A node attr's value; FLOAT and FLOATS (stored as float32 by ONNX) as the decimals written; STRING and
    STRINGS (bytes in the file) as text, which they must be."""
    value = helper.get_attribute_value(attr)
    if attr.type == onnx.AttributeProto.FLOAT:
        return written_decimal(value)
    if attr.type == onnx.AttributeProto.FLOATS:
        return [written_decimal(v) for v in value]
    if attr.type == onnx.AttributeProto.STRING:
        return _text(attr.name, value)
    if attr.type == onnx.AttributeProto.STRINGS:
        return [_text(attr.name, v) for v in value]
    return value


def _text(name: str, value: bytes) -> str:
    try:
        return value.decode()
    except UnicodeDecodeError:
        raise NotImportable(f"attr '{name}' is not UTF-8 text: {value[:40]!r}") from None


class Graph:
    """The names one ONNX graph (or subgraph) sees: gradgen vars, constants, and the enclosing graph's names."""

    def __init__(self, importer: "Importer", parent: "Graph | None" = None):
        self.importer, self.parent = importer, parent
        self.vars: dict[str, str] = {}  # ONNX value name -> gradgen var name
        self.consts: dict[str, np.ndarray] = {}
        self.initializers: dict[str, np.ndarray] = {}
        self.shapes: dict[str, str] = {}  # ONNX value name -> the gradgen var whose run-time shape it holds
        self.unit_dims: dict[str, tuple[str, int]] = {}  # ONNX bool -> (var, axis): "that dim is 1 at run time"
        self.dims: dict[str, tuple[str, int]] = {}  # ONNX value name -> (var, axis) whose run-time size it holds
        self.vectors: dict[str, ShapeVector] = {}  # ONNX value name -> a shape vector with run-time entries
        self.defined: set[str] = set(parent.defined) if parent is not None else set()  # names given a value

    def enclosing(self) -> Iterator["Graph"]:
        """This graph, then each graph around it outward."""
        g = self
        while g is not None:
            yield g
            g = g.parent

    def lookup_symbol(self, table: str, name: str) -> tuple[str, int] | None:
        """``name`` in ``dims`` or ``unit_dims`` of this graph or an enclosing one."""
        return next((getattr(g, table)[name] for g in self.enclosing() if name in getattr(g, table)), None)

    def lookup_shape(self, name: str) -> str | None:
        return next((g.shapes[name] for g in self.enclosing() if name in g.shapes), None)

    def lookup_vector(self, name: str) -> ShapeVector | None:
        return next((g.vectors[name] for g in self.enclosing() if name in g.vectors), None)

    def lookup_const(self, name: str) -> np.ndarray | None:
        for g in self.enclosing():
            if name in g.consts:
                return g.consts[name]
            if name in g.initializers:
                return g.initializers[name]
        return None

    def lookup_fixed(self, name: str) -> np.ndarray | None:
        """``name``'s value if it is a constant that is not a trainable parameter (a float initializer): what
        constant folding may read."""
        for g in self.enclosing():
            if name in g.consts:
                return g.consts[name]
            if name in g.initializers:
                value = g.initializers[name]
                return None if value.dtype.kind in "fc" else value
            if name in g.vars:
                return None
        return None

    def lookup_var(self, name: str) -> str | None:
        for g in self.enclosing():
            if name in g.vars:
                return g.vars[name]
            if name in g.initializers:
                g.vars[name] = self.importer.parameter(name, g.initializers[name])
                return g.vars[name]
        return None


class NodeContext:
    """One ONNX node being translated: its attrs, its inputs as gradgen vars or constants, and op appending."""

    def __init__(self, importer: "Importer", graph: Graph, node, opset: int):
        self.importer, self.graph, self.node, self.opset = importer, graph, node, opset
        self.attrs = {a.name: _attr_value(a) for a in node.attribute}

    def attr(self, name: str, default: Any = None) -> Any:
        value = self.attrs.get(name, default)
        return value.decode() if isinstance(value, bytes) else value

    def attr_ints(self, name: str, default: list[int] | None = None, length: int | None = None) -> list[int]:
        """Attr ``name`` (an ``ints`` attr, or ``default``) as a list of ints of ``length`` elements if given."""
        value = self.attr(name, default)
        if value is None:
            raise NotImportable(f"missing attr '{name}'")
        value = [int(v) for v in value]
        if length is not None and len(value) != length:
            raise NotImportable(f"attr '{name}' has {len(value)} values, {length} wanted")
        return value

    def has(self, k: int) -> bool:
        return len(self.node.input) > k and self.node.input[k] != ""

    @property
    def n_inputs(self) -> int:
        return len(self.node.input)

    def const(self, k: int) -> np.ndarray:
        """Input k's value, which must be known now."""
        if not self.has(k):
            raise NotImportable(f"input {k} is missing (gradgen needs it as a constant)")
        value = self.graph.lookup_const(self.node.input[k])
        if value is None:
            raise NotImportable(f"input {k} ('{self.node.input[k]}') must be a constant (gradgen keeps it as an attr)")
        return value

    def ints(self, k: int) -> list[int]:
        """Input k's value as a list of ints (a shape, axes, sizes): a constant of an integer type."""
        value = self.const(k)
        if value.dtype.kind not in "iu":
            raise NotImportable(f"input {k} ('{self.node.input[k]}') must hold integers, got {value.dtype.name}")
        return [int(v) for v in value.reshape(-1)]

    def scalar(self, k: int) -> float:
        """Input k's value as one number: a constant with exactly one element."""
        value = self.const(k)
        if value.size != 1 or value.dtype.kind not in "biuf":
            raise NotImportable(f"input {k} ('{self.node.input[k]}') must be one number, got {value.dtype.name}"
                                f"{list(value.shape)}")
        return value.reshape(-1)[0].item()

    def axis(self, axis: int, rank: int) -> int:
        """``axis`` (negative counts from the end) as an index into ``rank`` dims, which it must be."""
        if not -rank <= axis < rank:
            raise NotImportable(f"axis {axis} is out of range for rank {rank}")
        return axis % rank

    def is_const(self, k: int) -> bool:
        return self.has(k) and self.graph.lookup_const(self.node.input[k]) is not None

    def shape_source(self, k: int) -> str | None:
        """The var whose run-time shape input k is (the output of a ``Shape`` of a var with unknown dims)."""
        return self.graph.lookup_shape(self.node.input[k]) if self.has(k) else None

    def x(self, k: int = 0) -> str:
        """Input k as a gradgen var (a constant becomes a fill_constant op or a persistable var)."""
        name = self.node.input[k]
        var = self.graph.lookup_var(name)
        if var is None:
            value = self.graph.lookup_const(name)
            if value is None:
                raise NotImportable(f"input '{name}' is not defined")
            var = self.importer.constant_var(name, value)
            self.graph.vars[name] = var
        return var

    def var(self, k: int = 0):
        return self.importer.block().var(self.x(k))

    def shape(self, k: int = 0) -> tuple[int, ...]:
        return self.var(k).shape

    def rank(self, k: int = 0) -> int:
        return len(self.var(k).shape)

    def dtype(self, k: int = 0) -> str:
        return self.var(k).dtype

    def op(self, type: str, inputs: dict, attrs: dict | None = None, outs: dict[str, int] | None = None,
           names: dict[str, list[str]] | None = None) -> dict[str, list[str]]:
        """Append a gradgen op; output vars are named after ``names`` or fresh; returns slot -> var names."""
        schema = OP_SCHEMAS[type]
        outputs, fresh = {}, self.importer.fresh
        for slot in schema.outputs:
            if names and slot.name in names:
                outputs[slot.name] = [fresh(n) for n in names[slot.name]]
            elif outs is None or slot.name in outs:
                n = (outs or {}).get(slot.name, 1)
                outputs[slot.name] = [fresh(f"{type}") for _ in range(n)]
        inputs = {k: (v if isinstance(v, list) else [v]) for k, v in inputs.items()}
        self.importer.block().append_op(type, inputs, outputs, attrs or {}, callsite=f"onnx node {self.node.name!r}")
        return outputs

    def out(self, type: str, inputs: dict, attrs: dict | None = None, slot: str = "Out", k: int = 0) -> str:
        """Append a one-output gradgen op whose result is ONNX output k; returns the var name."""
        name = self.op(type, inputs, attrs, names={slot: [self.node.output[k]]})[slot][0]
        self.bind(k, name)
        return name

    def tmp(self, type: str, inputs: dict, attrs: dict | None = None, slot: str = "Out") -> str:
        return self.op(type, inputs, attrs)[slot][0]

    def window(self, what: str, kernel: list[int]) -> tuple[str, dict]:
        """Input 0 and the window attrs of a convolution over it, as the node's ONNX attrs give them
        (``import_windows.window``)."""
        return import_windows.window(self, what, kernel)

    def out_with_channel_bias(self, type: str, inputs: dict, attrs: dict, slot: str = "Output") -> str:
        """A gradgen op plus input 2 added per channel where the node has it (``import_windows``)."""
        return import_windows.out_with_channel_bias(self, type, inputs, attrs, slot)

    def bind(self, k: int, var: str) -> None:
        self.graph.vars[self.node.output[k]] = var

    def bind_const(self, k: int, value: np.ndarray) -> None:
        self.graph.consts[self.node.output[k]] = np.asarray(value)

    def subgraph(self, name: str) -> onnx.GraphProto:
        return self.attrs[name]

    def import_subgraph(self, graph_proto, bindings: dict[str, str]) -> list[str]:
        """Translate a subgraph into the current block with its inputs bound to vars; returns its outputs' vars."""
        return self.importer.import_graph(graph_proto, Graph(self.importer, self.graph), bindings)


def unsupported_nodes(model) -> list[str]:
    """``node #i (OpType)`` for every node of the model (and its subgraphs) with no importer function."""
    found = []

    def walk(graph, where):
        for i, node in enumerate(graph.node):
            if node.domain not in ("", "ai.onnx") or node.op_type not in import_table.IMPORTERS:
                found.append(f"{where}node #{i} '{node.name}' ({node.domain + '.' if node.domain else ''}"
                             f"{node.op_type}): not supported by the importer")
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g, f"{where}{node.op_type} #{i} {a.name}: ")
    walk(model.graph, "")
    return found


class Importer:
    """Builds one gradgen program from one ONNX model."""

    def __init__(self, model, constants: Mapping[str, Any], limits: ImportLimits = ImportLimits(),
                 bn_running_variance: str = "population"):
        self.model, self.opset, self.limits = model, check_opset(model), limits
        self.bn_running_variance = bn_running_variance
        """The ``running_variance`` of every training-mode batch_norm (``import_onnx``'s option)."""
        self.main, self.startup = Program(), Program()
        self.params: dict[str, np.ndarray] = {}
        self.frozen = {k: np.asarray(v) for k, v in constants.items()}
        self.problems: list[str] = []
        self.named: set[str] = set()
        """Names ``fresh`` has handed out: an op's outputs are named before ``append_op`` makes their vars."""

    def block(self):
        return self.main.current_block()

    def fresh(self, hint: str) -> str:
        """A var name like ``hint`` that no var has and no earlier call handed out."""
        name = hint = hint or "var"
        while name in self.named or self.main.has_var_anywhere(name):
            name = self.main.unique_name(hint)
        self.named.add(name)
        return name

    @contextmanager
    def scratch(self) -> Iterator[tuple[Program, dict[str, np.ndarray]]]:
        """Translations inside add their ops, vars and parameters to a scratch program (constant folding runs
        it); the real program, its parameters and the names handed out are as they were afterwards."""
        saved = self.main, self.startup, self.params, set(self.named)
        self.main, self.startup, self.params = Program(), Program(), {}
        try:
            yield self.main, self.params
        finally:
            self.main, self.startup, self.params, self.named = saved

    def translate(self, graph: Graph, node) -> None:
        """Import one node: folded to constants when its inputs all are (``import_fold``), else as ops."""
        translate = lambda g: import_table.IMPORTERS[node.op_type](NodeContext(self, g, node, self.opset))  # noqa
        inputs = foldable(node, graph)
        if inputs is not None and fold(self, graph, node, inputs, Graph(self), translate):
            return
        if not self.shape_arithmetic(graph, node):
            translate(graph)

    @staticmethod
    def shape_arithmetic(graph: Graph, node) -> bool:
        """Compute ``node`` at import if it is arithmetic on shape vectors with run-time entries and constants
        (``import_dims``): its output becomes a constant when every entry is known, else a shape vector."""
        names = list(node.input)
        vectors = [graph.lookup_vector(n) if n else None for n in names]
        if all(v is None for v in vectors) or "" in names:
            return False
        values = [v if v is not None else graph.lookup_fixed(n) for n, v in zip(names, vectors)]
        vector = evaluate_shape_vector(node, {a.name: helper.get_attribute_value(a) for a in node.attribute}, values)
        if vector is None:
            return False
        if vector.known():
            graph.consts[node.output[0]] = vector.value()
        else:
            graph.vectors[node.output[0]] = vector
        return True

    def parameter(self, name: str, value: np.ndarray) -> str:
        """An initializer used as data: a persistable parameter of the global block."""
        var = self.fresh(name)
        dtype = _dtype_of(value)
        self.main.global_block().create_var(var, value.shape, dtype, persistable=True, is_parameter=True,
                                            trainable=dtype.startswith("float"))
        self.params[var] = value.astype(dtype, copy=False)
        return var

    def constant_var(self, name: str, value: np.ndarray) -> str:
        """A constant used as data: ``fill_constant`` when all its elements are equal, else a frozen parameter.
        The fill value is the element as a Python int or float (``.item()``), never a float of an int: an int64
        2**53 + 1 or INT64_MAX stays exactly itself."""
        dtype = _dtype_of(value)
        flat = value.reshape(-1)
        if flat.size and (flat == flat[0]).all() and dtype != "bool":
            var = self.fresh(name)
            self.block().append_op("fill_constant", {}, {"Out": [var]},
                                   {"shape": list(value.shape), "dtype": dtype, "value": flat[0].item()})
            return var
        var = self.fresh(name)
        self.main.global_block().create_var(var, value.shape, dtype, persistable=True, is_parameter=True,
                                            trainable=False)
        self.params[var] = value.astype(dtype, copy=False)
        return var

    def import_graph(self, graph_proto, graph: Graph, bindings: dict[str, str]) -> list[str]:
        """Translate every node of ``graph_proto`` into the current block (each checked against its ONNX schema
        first); returns the vars of the graph's outputs."""
        graph.vars.update(bindings)
        for init in graph_proto.initializer:
            try:
                graph.initializers[init.name] = tensor_value(init, "initializer")
            except NotImportable as e:
                raise OnnxImportError(f"initializer '{init.name}': {e}") from None
        defined = graph.defined
        defined |= {i.name for i in graph_proto.input} | set(graph.initializers) | set(bindings)
        for i, node in enumerate(graph_proto.node):
            try:
                check_node(node, self.opset)
                check_defined_once(node, defined)
                self.translate(graph, node)
            except NotImportable as e:
                raise OnnxImportError(f"node #{i} '{node.name}' ({node.op_type}): {e}") from None
            except GradgenError as e:
                raise OnnxImportError(f"node #{i} '{node.name}' ({node.op_type}): gradgen rejects it: "
                                      f"{str(e).splitlines()[0]}") from None
        outs = []
        for o in graph_proto.output:
            var = graph.lookup_var(o.name)
            if var is None:
                value = graph.lookup_const(o.name)
                if value is None:
                    raise OnnxImportError(f"graph output '{o.name}' is never computed")
                try:
                    var = self.constant_var(o.name, value)
                except (NotImportable, GradgenError) as e:
                    raise OnnxImportError(f"graph output '{o.name}': {str(e).splitlines()[0]}") from None
            outs.append(var)
        return outs

    def run(self) -> tuple[Program, dict[str, np.ndarray]]:
        graph_proto = self.model.graph
        top = Graph(self)
        initialized = {t.name for t in graph_proto.initializer}
        with program_guard(self.main, self.startup):
            for inp in graph_proto.input:
                if inp.name in initialized:
                    continue
                if inp.name in self.frozen:
                    top.consts[inp.name] = self.frozen[inp.name]
                    continue
                if not inp.type.HasField("tensor_type"):
                    raise OnnxImportError(f"graph input '{inp.name}' is not a tensor")
                shape = _shape(inp)
                if shape is None:
                    raise OnnxImportError(f"graph input '{inp.name}' has no shape (gradgen needs its rank)")
                if any(d < -1 for d in shape):
                    raise OnnxImportError(f"graph input '{inp.name}' has negative dims {list(shape)}")
                if inp.name in top.vars:
                    raise OnnxImportError(f"graph input '{inp.name}' is declared twice")
                try:
                    dtype = numpy_dtype(inp.type.tensor_type.elem_type)
                except NotImportable as e:
                    raise OnnxImportError(f"graph input '{inp.name}': {e}") from None
                try:
                    top.vars[inp.name] = self.main.global_block().create_var(inp.name, shape, dtype,
                                                                             stop_gradient=True).name
                except GradgenError as e:
                    raise OnnxImportError(f"graph input {inp.name!r}: {e}") from None
            outs = self.import_graph(graph_proto, top, {})
        self.outputs = dict(zip((o.name for o in graph_proto.output), outs))
        return self.main, self.params


def import_onnx(model: "onnx.ModelProto | str | os.PathLike | bytes", *, constants: Mapping[str, Any] | None = None,
                max_constant_bytes: int = ImportLimits.max_constant_bytes,
                max_loop_iterations: int = ImportLimits.max_loop_iterations,
                bn_running_variance: str | None = None) -> tuple[Program, dict[str, np.ndarray], dict[str, str]]:
    """A gradgen program from an ONNX model (or a path to one, or its bytes).

    Returns ``(program, params, outputs)``: the program; the values of its persistable vars (load them
    into a scope, or ``save_params``); and ONNX graph output name -> gradgen var name. ``constants``
    freezes graph inputs to given values (for inputs that gradgen keeps as attrs, such as a shape).
    ``max_constant_bytes`` bounds the tensors the import itself makes (``ConstantOfShape``, the index of a
    strided ``Slice``) and ``max_loop_iterations`` the steps of each ``Loop`` at run time (``ImportLimits``).
    ``bn_running_variance`` is what the running variance of a training-mode ``BatchNormalization`` moves
    toward: "population" (ONNX's definition) or "unbiased" (n / (n - 1) times it, what PyTorch's ``BatchNorm``
    does). Left unset, it is "unbiased" for a model PyTorch exported (``producer_name`` "pytorch"), so that its
    training-mode export fine-tunes as the module does, and "population" for any other.
    Any malformed model raises ``OnnxImportError`` naming the node at fault; unsupported nodes are listed
    all at once.

        >>> program, params, outputs = import_onnx("model.onnx")
    """
    model = load_model(model)
    missing = unsupported_nodes(model)
    if missing:
        raise OnnxImportError(f"{len(missing)} node(s) cannot be imported:\n" + "\n".join(f"  - {m}" for m in missing))
    if bn_running_variance not in (None, *RUNNING_VARIANCES):
        raise OnnxImportError(f"bn_running_variance must be 'population' or 'unbiased', got {bn_running_variance!r}")
    importer = Importer(model, constants or {}, ImportLimits(int(max_constant_bytes), int(max_loop_iterations)),
                        bn_running_variance or default_running_variance(model))
    program, params = importer.run()
    return program, params, importer.outputs
