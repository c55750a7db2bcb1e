"""The backend folders are alike and keep to their own: the xla lowerings and the torch kernels carry the numpy
kernels' family file names, an op's lowering or torch kernel sits in the file named as its numpy kernel's, no engine imports another's folder (but the torch
engine's use of numpy's BLAS pools, ``CROSSING``), and what they share lives in ``backend/shared``, which imports no
engine and no jax.

Imports are read from the source (``test_import_cycles.import_graph``), so these run without jax, except the one
that compares the two engines' tables.
"""
from __future__ import annotations

import ast

import networkx as nx
import pytest

from tests.framework.test_import_cycles import FRAMEWORK, import_graph

BACKEND = FRAMEWORK / "backend"
KERNELS = BACKEND / "numpy" / "kernels"
LOWERINGS = BACKEND / "xla" / "lowerings"


def _stems(folder) -> set[str]:
    return {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}


def _imports(prefix: str) -> dict[str, set[str]]:
    """Each framework module under ``prefix`` -> the framework modules it imports."""
    graph = import_graph(FRAMEWORK, "framework")
    return {m: set(graph.successors(m)) for m in graph if m == prefix or m.startswith(prefix + ".")}


def test_every_lowering_family_file_is_named_as_a_kernel_family_file():
    assert _stems(LOWERINGS), "no lowering families found"
    assert not _stems(LOWERINGS) - _stems(KERNELS)


def _with_a_table(folder, table: str) -> set[str]:
    """The modules of ``folder`` that define ``table`` at their top level (the family files, not the helpers)."""
    def defines(path) -> bool:
        return any(isinstance(node, ast.Assign) and any(getattr(t, "id", None) == table for t in node.targets)
                   for node in ast.parse(path.read_text()).body)
    return {p.stem for p in folder.glob("*.py") if p.stem != "__init__" and defines(p)}


def test_every_torch_kernel_family_file_is_named_as_a_numpy_kernel_family_file_or_an_op_family():
    """A torch kernel beside an op numpy derives sits in the op's own family file (``program/ops/<family>.py``),
    since numpy has no kernel file of that name: layer norm in ``network``, softmax in ``nn``."""
    families = _with_a_table(BACKEND / "torch" / "kernels", "KERNELS")
    assert len(families) >= 5, families
    assert not families - _stems(KERNELS) - _stems(FRAMEWORK.parent / "program" / "ops")


ENGINES = ("numpy", "xla", "torch")
CROSSING = {("framework.backend.torch.runner", "framework.backend.numpy.threads")}
"""The one import across engine folders: the torch engine's products run on numpy's OpenBLAS, whose thread pools
``numpy/threads.blas_threads`` sets."""


@pytest.mark.parametrize("engine,other", [(e, o) for e in ENGINES for o in ENGINES if e != o])
def test_an_engine_imports_nothing_of_another(engine, other):
    reached = {m: sorted(t for t in targets if t.startswith(f"framework.backend.{other}") and (m, t) not in CROSSING)
               for m, targets in _imports(f"framework.backend.{engine}").items()}
    assert not {m: t for m, t in reached.items() if t}


def test_the_shared_place_reaches_no_engine_and_no_jax():
    graph = import_graph(FRAMEWORK, "framework")
    shared = [m for m in graph if m.startswith("framework.backend.shared")]
    reached = set().union(*(nx.descendants(graph, m) for m in shared))
    assert not {m for m in reached if m.startswith(tuple(f"framework.backend.{e}" for e in ENGINES))}
    for path in (BACKEND / "shared").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            assert not [n for n in names if n.split(".")[0] == "jax"], path.name


def test_an_op_lowered_and_kernelled_by_hand_sits_in_families_of_one_name():
    pytest.importorskip("jax")
    from gradgen.framework.backend.numpy.kernels import FAMILIES as KERNEL_FAMILIES
    from gradgen.framework.backend.xla.lowerings import FAMILIES as LOWERING_FAMILIES

    def family_of(families, table: str) -> dict[str, str]:
        return {t: f.__name__.rsplit(".", 1)[-1] for f in families for t in getattr(f, table, {})}

    kernels, lowerings = family_of(KERNEL_FAMILIES, "KERNELS"), family_of(LOWERING_FAMILIES, "LOWERINGS")
    apart = {t: (kernels[t], lowerings[t]) for t in kernels.keys() & lowerings.keys() if kernels[t] != lowerings[t]}
    assert not apart, f"op type -> (numpy kernel family, xla lowering family): {apart}"


def test_an_op_kernelled_by_hand_on_torch_and_numpy_sits_in_families_of_one_name():
    pytest.importorskip("torch")
    from gradgen.framework.backend.numpy.kernels import FAMILIES as KERNEL_FAMILIES
    from gradgen.framework.backend.torch.kernels import FAMILIES as TORCH_FAMILIES, FASTER
    from gradgen.program.ops import FAMILIES as SCHEMA_FAMILIES

    def family_of(families) -> dict[str, str]:
        return {t: f.__name__.rsplit(".", 1)[-1] for f in families for t in getattr(f, "KERNELS", {})}

    numpy_families, torch_families = family_of(KERNEL_FAMILIES), family_of(TORCH_FAMILIES)
    assert torch_families.keys() - numpy_families.keys() <= FASTER.keys(), \
        "a torch kernel for an op numpy derives, without the measurement that keeps it (FASTER)"
    # an op numpy derives sits in the file named as its schema's family (pooling's: conv)
    for family in SCHEMA_FAMILIES:
        for schema in family.SCHEMAS:
            numpy_families.setdefault(schema.type, family.__name__.rsplit(".", 1)[-1])
    apart = {t: (numpy_families[t], f) for t, f in torch_families.items() if numpy_families[t] != f}
    assert not apart, f"op type -> (numpy kernel family, torch kernel family): {apart}"
