"""Import-time constant folding: a node whose inputs are all known now becomes a constant.

Exporters compute shapes in the graph (``Shape -> Gather -> Add -> Concat -> Reshape``, a head size from
``Mod`` and ``Div``), and gradgen keeps shapes, axes and sizes as attrs that must be known when the op is
built. A node whose inputs are all constants is imported into a scratch program by its ordinary
translation function and run there on gradgen's own numpy kernels; its outputs become constants of the
graph, so later nodes read them as attrs. Nothing is evaluated by any other means.

What is never folded: nodes without inputs, random and training-mode nodes, control flow, and any node
that reads a float initializer (a trainable parameter stays a parameter, even where an exporter
transposes or scales it). The ``Shape`` of a var with dims known only at run time is not a constant: it is
a shape vector (``import_dims``), whose known entries become constants where arithmetic picks only them.
A node whose result would be larger than the import limit is imported as ops instead.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from gradgen.program import Program, program_guard
from gradgen.program.errors import GradgenError

from ...errors import ExecutionError
from ...runtime.executor import Executor
from ...runtime.scope import Scope
from .errors import NotImportable
from .import_checks import check_size

__all__ = ["NEVER_FOLDED", "foldable", "fold"]

NEVER_FOLDED = frozenset({"Constant", "If", "Loop", "Dropout", "BatchNormalization", "RandomUniformLike",
                          "RandomNormalLike", "RandomUniform", "RandomNormal", "Multinomial", "Bernoulli"})
"""Op types whose nodes are imported as ops even with constant inputs (random, training-mode, control flow,
or ``Constant``, which binds a constant itself)."""

def foldable(node, graph) -> dict[str, np.ndarray] | None:
    """The constant inputs of ``node`` by name when every one of its inputs is one and it may be folded,
    else None."""
    names = [n for n in node.input if n]
    if not names or node.op_type in NEVER_FOLDED or node.domain not in ("", "ai.onnx"):
        return None
    values = {}
    for name in names:
        value = graph.lookup_fixed(name)
        if value is None:
            return None
        values[name] = value
    return values


def _run(program: Program, params: dict[str, np.ndarray], fetch: list[str]) -> list[np.ndarray]:
    scope = Scope()
    for name, value in params.items():
        scope.set(name, value)
    return Executor(backend="numpy", check_types=True).run(program, feed={}, fetch_list=fetch, scope=scope)


def fold(importer, graph, node, inputs: dict[str, np.ndarray], scratch_graph, translate: Callable) -> bool:
    """Import ``node`` (its ``inputs`` all constants) into a scratch program with ``translate(scratch_graph)``,
    run it, and bind its outputs as constants of ``graph``; False (nothing bound, nothing added to the real
    program) when a result would be larger than the import limit or is not a tensor of known shape.
    ``scratch_graph`` is an empty graph: the node sees its constant inputs and nothing else."""
    scratch_graph.consts.update(inputs)
    with importer.scratch() as (program, params):
        with program_guard(program, Program()):
            translate(scratch_graph)
        block = program.global_block()
        for var in block.vars.values():
            if -1 in var.shape:
                return False
            try:
                check_size(var.shape, np.dtype(var.dtype).itemsize, "a folded value", importer.limits)
            except NotImportable:
                return False
        known, fetch = {}, {}
        for k, name in enumerate(node.output):
            if not name:
                continue
            if name in scratch_graph.consts:
                known[name] = scratch_graph.consts[name]
            elif name in scratch_graph.vars:
                fetch[name] = scratch_graph.vars[name]
            else:
                return False  # bound as a run-time shape or dim: not a value
        try:
            values = _run(program, params, list(fetch.values())) if fetch else []
        except (ExecutionError, GradgenError) as e:
            raise NotImportable(f"folding it at import (all its inputs are constants): "
                                f"{str(e).splitlines()[0]}") from None
    known.update(zip(fetch, (np.asarray(v) for v in values)))
    graph.consts.update(known)
    return True
