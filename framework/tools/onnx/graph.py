"""A small builder for ONNX graphs: nodes with fresh, model-wide unique names, and constants.

ONNX values are single-assignment and names must be unique across a model and all of
its subgraphs, so every builder of one model shares one ``Names`` allocator.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

__all__ = ["Names", "GraphBuilder", "onnx_dtype", "value_info", "fill_value"]


def onnx_dtype(dtype: str | np.dtype) -> int:
    """The ``TensorProto`` element type of a numpy / gradgen dtype."""
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def value_info(name: str, dtype: str, shape: Sequence[int] | None) -> onnx.ValueInfoProto:
    """A typed value; -1 dims (known only at run time) become unnamed dims."""
    dims = None if shape is None else [None if d < 0 else int(d) for d in shape]
    return helper.make_tensor_value_info(name, onnx_dtype(dtype), dims)


def fill_value(value, dtype: str) -> onnx.TensorProto:
    """The one-element tensor ``ConstantOfShape`` fills with."""
    return numpy_helper.from_array(np.asarray([value], dtype=dtype))


class Names:
    """Hands out names no other value or node of the model has."""

    def __init__(self) -> None:
        self.used: set[str] = set()
        self.counts: dict[str, int] = {}

    def reserve(self, name: str) -> str:
        self.used.add(name)
        return name

    def fresh(self, hint: str) -> str:
        """``hint`` itself if unused, else ``hint.k`` for the first free k."""
        if hint not in self.used:
            return self.reserve(hint)
        k = self.counts.get(hint, 0)
        while f"{hint}.{k}" in self.used:
            k += 1
        self.counts[hint] = k + 1
        return self.reserve(f"{hint}.{k}")


class GraphBuilder:
    """The nodes of one graph (the model's main graph or a subgraph), in order."""

    def __init__(self, names: Names) -> None:
        self.names = names
        self.nodes: list[onnx.NodeProto] = []

    def node(self, op_type: str, inputs: Sequence[str], out: str | None = None, n_out: int = 1, **attrs) -> str:
        """Append a node; returns its (first) output name. ``out`` names it, else a fresh temp name."""
        outs = [out or self.names.fresh(f"{op_type.lower()}_out")]
        outs += [self.names.fresh(f"{op_type.lower()}_out") for _ in range(n_out - 1)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=self.names.fresh(op_type), **attrs))
        return outs[0]

    def node_multi(self, op_type: str, inputs: Sequence[str], outs: Sequence[str], **attrs) -> list[str]:
        """Append a node with several named outputs."""
        self.nodes.append(helper.make_node(op_type, list(inputs), list(outs), name=self.names.fresh(op_type), **attrs))
        return list(outs)

    def const(self, value, dtype: str | np.dtype | None = None, hint: str = "const") -> str:
        """A ``Constant`` node holding ``value`` (as ``dtype`` if given)."""
        array = np.asarray(value, dtype=dtype)
        name = self.names.fresh(hint)
        self.nodes.append(helper.make_node("Constant", [], [name], name=self.names.fresh("Constant"),
                                           value=numpy_helper.from_array(array, name)))
        return name

    def graph(self, name: str, inputs: Sequence[onnx.ValueInfoProto],
              outputs: Sequence[onnx.ValueInfoProto]) -> onnx.GraphProto:
        """These nodes as a graph with the given typed inputs and outputs."""
        return helper.make_graph(self.nodes, self.names.fresh(name), list(inputs), list(outputs))

    def ints(self, values: Sequence[int]) -> str:
        """A constant 1-D int64 tensor (axes, shapes, pads, starts)."""
        return self.const(np.asarray(list(values), dtype=np.int64).reshape(-1), hint="ints")
