"""The networkx dataflow view: versioned vars keep in-place updates acyclic."""
import networkx as nx

from gradgen.program import Program, layers, program_guard
from gradgen.program.graph import dataflow_graph, latest_version


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


def _two_branches():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        y = layers.data("y", [3], "float64")
        a = layers.exp(x)      # op 0
        b = layers.tanh(y)     # op 1
        c = layers.relu(a)     # op 2
    return main.global_block(), a, b, c


def test_ancestors_and_descendants_follow_only_dataflow():
    from gradgen.program.graph import ancestor_ops, descendant_ops

    block, a, b, c = _two_branches()
    assert ancestor_ops(block, [c.name]) == {0, 2}
    assert ancestor_ops(block, [b.name]) == {1}
    assert descendant_ops(block, ["x"]) == {0, 2}
    assert descendant_ops(block, ["y"]) == {1}


def test_topological_order_keeps_positions_when_they_are_valid():
    from gradgen.program.graph import ops_in_topological_order

    block, *_ = _two_branches()
    assert ops_in_topological_order(block) == [0, 1, 2]



def test_reachable_matches_networkx_on_a_view_without_the_stopped_nodes_out_edges():
    import random

    from gradgen.program.graph import reachable

    rng = random.Random(0)
    for trial in range(30):
        graph = nx.gnp_random_graph(40, 0.08, seed=trial, directed=True)
        graph = nx.DiGraph((u, v) for u, v in graph.edges if u < v)  # a DAG, as dataflow graphs are
        graph.add_nodes_from(range(40))
        stop = set(rng.sample(range(40), 6))
        view = nx.subgraph_view(graph, filter_edge=lambda u, v: u not in stop)
        for start in (0, 5, 17, rng.choice(sorted(stop))):
            assert reachable(graph, start, stop=stop) == nx.descendants(view, start)
            assert reachable(graph, start, reverse=True, stop=stop) == nx.ancestors(view, start)
    assert reachable(nx.DiGraph([(1, 2), (2, 3)]), 1, stop={1}) == set()  # nothing leaves a stopped start
