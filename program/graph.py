"""networkx views of a block's dataflow, for the verifier and for passes.

Vars are versioned: ``("var", name, 0)`` is a var's value before any op of
the block writes it, and every op that writes it makes the next version, so
a program that updates a var in place (an optimizer step) is still a DAG.
Ops are ``("op", i)``. Edges go var -> op for inputs and op -> var for outputs.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Container, Iterable

import networkx as nx

if TYPE_CHECKING:
    from .block import Block


def dataflow_graph(block: "Block", ops: Iterable[int] | None = None) -> nx.DiGraph:
    """The DiGraph of ``block``'s ops (all, or the indices in ``ops``, in order) and versioned vars."""
    indices = range(len(block.ops)) if ops is None else ops
    version: dict[str, int] = {}
    op_nodes, var_nodes, edges = [], [], []
    for i in indices:
        op = block.ops[i]
        node = ("op", i)
        op_nodes.append(node)
        for name in op.input_arg_names:
            v = ("var", name, version.get(name, 0))
            var_nodes.append(v)
            edges.append((v, node))
        for name in op.output_arg_names:
            version[name] = version.get(name, 0) + 1
            v = ("var", name, version[name])
            var_nodes.append(v)
            edges.append((node, v))
    graph = nx.DiGraph()
    graph.add_nodes_from(op_nodes, kind="op")
    graph.add_nodes_from(var_nodes, kind="var")
    graph.add_edges_from(edges)
    return graph


def latest_version(graph: nx.DiGraph, name: str) -> tuple:
    """The node of the last value of var ``name`` in ``graph`` (version 0 if no op writes it)."""
    k = 0
    while graph.has_node(("var", name, k + 1)):
        k += 1
    return ("var", name, k)


def reachable(graph: nx.DiGraph, start, *, reverse: bool = False, stop: Container = frozenset()) -> set:
    """Nodes reachable from ``start`` (itself excluded), as ``nx.descendants`` (or ``nx.ancestors`` when
    ``reverse``) would find them in ``graph`` with every edge leaving a node of ``stop`` removed.

    A stopped node can still be reached going forward, but nothing beyond it;
    going backward it is never reached. A plain search over the adjacency, with
    no filtered view: passes call it on graphs of hundreds of thousands of nodes.

    >>> reachable(dataflow_graph(block), ("var", "x", 0), stop={("var", "h", 1)})
    """
    step = graph.predecessors if reverse else graph.successors
    seen = {start}
    frontier = [start] if reverse or start not in stop else []
    while frontier:
        for node in step(frontier.pop()):
            if node in seen or (reverse and node in stop):
                continue
            seen.add(node)
            if reverse or node not in stop:
                frontier.append(node)
    seen.discard(start)
    return seen


def ops_in_topological_order(block: "Block") -> list[int]:
    """Op indices of ``block`` in a dataflow-respecting order (ties broken by position)."""
    graph = dataflow_graph(block)
    order = nx.lexicographical_topological_sort(graph, key=lambda n: (n[1], n[0]) if n[0] == "op" else (-1, n[1]))
    return [n[1] for n in order if n[0] == "op"]


def ancestor_ops(block: "Block", var_names: Iterable[str]) -> set[int]:
    """Indices of the ops whose results flow into the last values of ``var_names``."""
    graph = dataflow_graph(block)
    found: set = set()
    for name in var_names:
        found |= nx.ancestors(graph, latest_version(graph, name))
    return {n[1] for n in found if n[0] == "op"}


def descendant_ops(block: "Block", var_names: Iterable[str]) -> set[int]:
    """Indices of the ops that read, directly or through other ops, the values ``var_names`` had before the block."""
    graph = dataflow_graph(block)
    found: set = set()
    for name in var_names:
        start = ("var", name, 0)
        if graph.has_node(start):
            found |= nx.descendants(graph, start)
    return {n[1] for n in found if n[0] == "op"}


__all__ = [
    "dataflow_graph", "latest_version", "reachable", "ops_in_topological_order", "ancestor_ops", "descendant_ops"
]
