"""program/'s modules import one another in one direction: walking every import with ``ast`` finds no cycle.

Imports at module level and inside functions both count; imports under ``if TYPE_CHECKING:`` do not (they
never run: they name types for annotations). A relative import ``from .x import y`` is an edge to module ``x``,
or to ``x.y`` when that is a module of its own.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx

import gradgen.program

ROOT = Path(gradgen.program.__file__).resolve().parent
PACKAGE = "gradgen.program"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((PACKAGE,) + parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Every Import/ImportFrom node of ``tree``, at any depth, except those under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``node`` (in ``module``) imports."""
    if isinstance(node, ast.Import):
        bases = [alias.name for alias in node.names]
        return {b for b in bases if b in modules}
    if node.level:
        package = module if is_package else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{node.module}" if node.module else package
    else:
        base = node.module or ""
    found = {base} if base in modules else set()
    found |= {f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules}
    return found


def import_graph() -> nx.DiGraph:
    """program/'s modules as nodes, an edge a -> b when module a imports module b."""
    files = {(_module_name(p), p.name == "__init__.py"): p for p in ROOT.rglob("*.py")}
    modules = {name for name, _ in files}
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for (module, is_package), path in files.items():
        for node in _imports(ast.parse(path.read_text(), str(path))):
            for target in _targets(node, module, is_package, modules):
                if target != module:
                    graph.add_edge(module, target)
    return graph


def test_the_walk_sees_module_and_function_level_imports():
    graph = import_graph()
    assert graph.has_edge("gradgen.program.block", "gradgen.program.validate")  # module level
    assert graph.has_edge("gradgen.program", "gradgen.program.layers")  # ``from . import layers``
    assert graph.number_of_nodes() > 40


def test_function_level_imports_count_and_type_checking_ones_do_not():
    tree = ast.parse("def f():\n    from .serialize import x\nif TYPE_CHECKING:\n    from .block import Block\n")
    found = {t for node in _imports(tree)
             for t in _targets(node, "gradgen.program.program", False,
                               {"gradgen.program.serialize", "gradgen.program.block"})}
    assert found == {"gradgen.program.serialize"}


def test_no_import_cycle_among_program_modules():
    cycles = [c for c in nx.simple_cycles(import_graph())]
    assert cycles == [], "import cycles in program/: " + "; ".join(" -> ".join(c + c[:1]) for c in cycles[:5])


def test_program_imports_neither_grad_makers_nor_framework():
    for path in ROOT.rglob("*.py"):
        for node in _imports(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            assert not any(n.startswith(("gradgen.framework", "gradgen.grad_makers")) for n in names), path


def test_the_ir_does_not_import_the_builder():
    graph = import_graph()
    builder = {m for m in graph if m.startswith("gradgen.program.layers")} | {"gradgen.program.guard"}
    ir = {"gradgen.program." + m for m in ("variable", "operator", "block", "program", "validate", "schema")}
    for module in ir:
        assert not (nx.descendants(graph, module) & builder), module


DOC = Path(__file__).resolve().parents[2] / "design_docs" / "ir.md"


def _documented_rows() -> list[list[str]]:
    """The module rows of ir.md's layering listing, top to bottom (``layers/`` and ``ops/`` stand for a package)."""
    text = DOC.read_text()
    listing = text.split("each row imports only rows below it:", 1)[1].split("```")[1]
    return [re.split(r"\s{3,}", line.strip())[0].split() for line in listing.strip().splitlines()]


def _row_of(graph: nx.DiGraph, rows: list[list[str]]) -> dict[str, tuple[int, str]]:
    """Each module's (row, group): a module listed by name is its own group, a package's modules share one."""
    where = {}
    for i, row in enumerate(rows):
        for token in row:
            if token == "__init__":
                where[PACKAGE] = (i, token)
            elif token.endswith("/"):
                prefix = f"{PACKAGE}.{token[:-1]}"
                for module in graph:
                    if (module == prefix or module.startswith(prefix + ".")) and module not in where:
                        where[module] = (i, token)
            else:
                where[f"{PACKAGE}.{token.replace('/', '.')}"] = (i, token)
    return where


def test_the_layering_listing_in_ir_md_matches_the_imports():
    graph = import_graph()
    rows = _documented_rows()
    assert rows[0] == ["__init__"] and rows[1] == ["layers/operators"]
    where = _row_of(graph, rows)
    assert set(where) == set(graph.nodes), f"not in the listing: {sorted(set(graph.nodes) - set(where))}"
    for a, b in graph.edges:
        (row_a, group_a), (row_b, group_b) = where[a], where[b]
        assert row_a < row_b or (group_a == group_b and group_a.endswith("/")), \
            f"{a} (row {row_a}) imports {b} (row {row_b}): ir.md says each row imports only rows below it"
