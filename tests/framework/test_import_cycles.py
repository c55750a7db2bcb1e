"""No module of the runtime imports, directly or around a circle, a module that imports it back.

Imports are read from the source with ``ast``, wherever they stand (a
function-level import counts like any other: it cannot hide a cycle).
"""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

import gradgen.framework
import gradgen.grad_makers

FRAMEWORK = Path(gradgen.framework.__file__).parent
GRAD_MAKERS = Path(gradgen.grad_makers.__file__).parent


def _module_name(path: Path, root: Path, package: str) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base[:len(base) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph(root: Path, package: str) -> nx.DiGraph:
    """Module -> the modules of ``package`` (rooted at ``root``) it imports, as a directed graph."""
    files = {_module_name(p, root, package): p for p in root.rglob("*.py")}
    graph = nx.DiGraph()
    graph.add_nodes_from(files)
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(node, module, is_package)
                # ``from . import x`` names a module when there is one called x, else a name in the package.
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for target in targets:
                if target in files and target != module:
                    graph.add_edge(module, target)
    return graph


NUMPY = FRAMEWORK / "backend" / "numpy"


NUMPY_PACKAGE = "framework.backend.numpy"
"""The numpy backend's modules by their full names: named plain ``numpy``, ``import numpy`` would read as an
import of the backend's own package."""


def test_the_graph_reader_sees_relative_and_package_imports():
    graph = import_graph(NUMPY, NUMPY_PACKAGE)

    def at(name: str) -> str:
        return f"{NUMPY_PACKAGE}.{name}"

    assert graph.has_edge(at("plan"), at("run"))
    assert graph.has_edge(at("kernels"), at("kernels.control_flow"))  # ``from . import control_flow``
    assert graph.has_edge(at("kernels.control_flow"), at("kernels.signature"))
    assert graph.has_edge(at("plan_data"), at("kernels"))
    assert not graph.has_edge(at("kernels.metrics"), NUMPY_PACKAGE)  # ``import numpy`` is numpy's


@pytest.mark.parametrize("root,package", [(FRAMEWORK / "runtime", "runtime"), (NUMPY, NUMPY_PACKAGE),
                                          (FRAMEWORK, "framework"), (GRAD_MAKERS, "grad_makers")])
def test_no_module_imports_in_a_cycle(root, package):
    cycles = list(nx.simple_cycles(import_graph(root, package)))
    assert not cycles, f"import cycles: {cycles}"


def test_kernels_never_import_the_plan_the_run_loop_or_the_executor():
    """Control-flow kernels get their sub-plans from the plan builder, so no kernel reaches what runs kernels."""
    graph = import_graph(FRAMEWORK, "framework")
    kernels = [m for m in graph if m.startswith("framework.backend.numpy.kernels")]
    reached = set().union(*(nx.descendants(graph, m) for m in kernels))
    assert not reached & {"framework.backend.numpy.plan", "framework.backend.numpy.plan_data",
                          "framework.backend.numpy.run", "framework.backend.numpy.runner",
                          "framework.runtime.executor"}, sorted(reached)


def test_the_shared_runtime_imports_no_compiled_backend():
    """jax is an extra: the executor and the scope load a compiled backend only through ``backend.load_backend``."""
    graph = import_graph(FRAMEWORK, "framework")
    reached = set().union(*(nx.descendants(graph, m) for m in graph if m.startswith("framework.runtime")))
    assert not {m for m in reached if m.startswith("framework.backend.xla")}, sorted(reached)


def test_the_runtime_knows_a_backend_only_through_the_backend_interface():
    """``runtime/`` imports ``framework.backend`` (``runner(name, settings)``) and the analyses the backends share
    (``backend/shared``), never a backend's own modules."""
    graph = import_graph(FRAMEWORK, "framework")
    reached = {target for module in graph if module.startswith("framework.runtime")
               for target in graph.successors(module) if target.startswith("framework.backend")}
    allowed = {m for m in reached if m == "framework.backend" or m.startswith("framework.backend.shared")}
    assert reached == allowed, sorted(reached - allowed)
