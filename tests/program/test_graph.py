"""The networkx dataflow view: versioned vars keep in-place updates acyclic."""
import networkx as nx

from program import Program, layers, program_guard
from program.graph import dataflow_graph, latest_version


def test_versioned_graph_of_an_in_place_update():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        h = layers.exp(x)
        layers.assign(layers.relu(h), output=h)  # h written twice
        layers.tanh(h)
    graph = dataflow_graph(main.global_block())
    assert nx.is_directed_acyclic_graph(graph)
    assert latest_version(graph, "exp_0") == ("var", "exp_0", 2)
    assert list(graph.successors(("var", "exp_0", 1))) == [("op", 1)]  # relu read the first value
    assert list(graph.successors(("var", "exp_0", 2))) == [("op", 3)]  # tanh reads the assigned one
    assert nx.ancestors(graph, ("op", 3)) >= {("op", 0), ("op", 1), ("op", 2), ("var", "x", 0)}
    assert {graph.nodes[n]["kind"] for n in graph} == {"op", "var"}
