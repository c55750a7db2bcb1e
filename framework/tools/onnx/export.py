"""gradgen program -> ONNX model (opset ``OPSET``), checked by ``onnx.checker`` with shape inference.

The export walks block 0 once. Vars the kept ops read before any op writes them become graph
inputs, or initializers when ``params`` holds their value. ONNX values are written once, so a var
written again (a parameter updated by an optimizer op) gets a new value name; the new values of
persistable vars are graph outputs named ``<var>@NEW``. Each op is lowered by the function its
type has in ``LOWERINGS``; control-flow ops lower their sub-blocks into subgraphs.
"""
from __future__ import annotations

import os
from collections import ChainMap
from typing import Any, Mapping, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from functools import partial

from gradgen.framework.backend.derive import with_derived, with_primitives
from gradgen.framework.passes.backward import seeded_targets
from gradgen.program.ops import OP_SCHEMAS
from gradgen.program.subblocks import owned_blocks

from . import (lower_collective, lower_control, lower_conv, lower_index, lower_math, lower_metrics, lower_nn,
               lower_norm, lower_recurrent, lower_schedule, lower_tensor)
from .context import Lowering
from . import lower_derived
from .lower_derived import derived_export
from .errors import OnnxExportError
from .graph import GraphBuilder, Names, value_info

__all__ = ["OPSET", "LOWERINGS", "MAPPED", "OWN_EXPORTS", "UNEXPORTABLE", "LIMITS", "XP", "export_onnx",
           "unexportable_ops", "UPDATED_SUFFIX"]

OPSET = 17
"""The ONNX opset every exported model imports (default domain only)."""

IR_VERSION = 8
"""The ONNX IR version of opset 17."""

UPDATED_SUFFIX = "@NEW"
"""Graph output name suffix of a persistable var's value after the program ran (an updated parameter)."""

MAPPED = {schema.type: schema.onnx_mapping for schema in OP_SCHEMAS.values() if schema.onnx_mapping}
"""op type -> its one ONNX node and the translations its family module writes (``OpSchema.onnx_mapping``)."""

OWN_EXPORTS = {**lower_math.OWN_EXPORTS, **lower_norm.OWN_EXPORTS, **lower_nn.OWN_EXPORTS, **lower_tensor.OWN_EXPORTS,
               **lower_conv.OWN_EXPORTS, **lower_index.OWN_EXPORTS, **lower_schedule.OWN_EXPORTS,
               **lower_metrics.OWN_EXPORTS,
               **{t: f"one {m.node} node, mapped beside its schema (OpSchema.onnx_mapping)" for t, m in MAPPED.items()
                  if m.to_onnx}}
"""op type -> why an op that states its math (``OpSchema.compute``) keeps a hand-written export (each family
module says so beside its lowering)."""

XP = with_primitives(lower_derived.XP, lower_conv.PRIMITIVES)
"""The ``xp`` an op's compute is traced over into ONNX nodes: numpy's names (``lower_derived.XP``) and the
convolution (``lower_conv.PRIMITIVES``)."""

LOWERINGS = with_derived({**{t: m.to_onnx for t, m in MAPPED.items() if m.to_onnx},
                          **lower_math.LOWERINGS, **lower_tensor.LOWERINGS, **lower_nn.LOWERINGS,
                          **lower_norm.LOWERINGS, **lower_conv.LOWERINGS, **lower_control.LOWERINGS,
                          **lower_index.LOWERINGS, **lower_schedule.LOWERINGS, **lower_recurrent.LOWERINGS,
                          **lower_metrics.LOWERINGS}, partial(derived_export, xp=XP), "ONNX export", OWN_EXPORTS)
"""gradgen op type -> lowering function: derived from the op's math or ONNX node (``lower_derived``), or the
family modules' own."""

_MPI = ("exchanges values between the processes of an MPI job, which no ONNX op does (export the program "
        "before data_parallel rewrote it, or pass single_process=True for the graph of one process alone)")
_RECURRENT_GRAD = ("is backpropagation (or forward mode) through a whole recurrence, which no ONNX op computes "
                   "(export the forward program, or train it in gradgen)")
UNEXPORTABLE = {"allreduce_start": _MPI, "allreduce_wait": _MPI, "broadcast": _MPI,
                **{f"{c}_{k}": _RECURRENT_GRAD for c in ("lstm", "gru") for k in ("grad", "jvp")}}
"""gradgen op types no ONNX graph can express -> why; every op of these types is listed in the export error."""

LIMITS = {**lower_tensor.LIMITS, **lower_nn.LIMITS, **lower_conv.LIMITS}
"""gradgen op type -> check that says why one op of that type cannot be exported (or None)."""


def _var_name(v) -> str:
    return v if isinstance(v, str) else v.name


def _sinks(block) -> list[str]:
    """Non-persistable vars some op writes and no op reads: the natural outputs of an inference program."""
    read = {n for op in block.ops for names in op.inputs.values() for n in names}
    out = []
    for op in block.ops:
        for names in op.outputs.values():
            out += [n for n in names if n not in read and not block.var(n).persistable and n not in out]
    return out


def _default_fetch(block) -> list[str]:
    """The losses a backward pass was seeded from, then the vars written and never read."""
    losses = seeded_targets(block)
    return losses + [n for n in _sinks(block) if n not in losses]


def _updated(block) -> list[str]:
    """Persistable vars of block 0 that some op writes, in first-write order.

    An op in inference mode (``is_test``: batch norm of a pruned program) writes the running statistics it
    reads back unchanged, so that write is no update.
    """
    out = []
    for op in block.ops:
        unchanged = set(op.input_arg_names) if op.attrs.get("is_test") else set()
        for names in op.outputs.values():
            out += [n for n in names if block.var(n).persistable and n not in out and n not in unchanged]
    return out


def _needed_ops(block, outputs: Sequence[str]) -> list:
    """The ops of block 0 the outputs depend on, in program order (a backward slice)."""
    needed, kept = set(outputs), []
    for op in reversed(block.ops):
        outs = {n for names in op.outputs.values() for n in names}
        if outs & needed:
            kept.append(op)
            needed -= outs
            needed |= {n for names in op.inputs.values() for n in names}
    return kept[::-1]


def _owned_ops(program, op) -> list:
    """``op`` and every op of the sub-blocks it owns, recursively, with their block index and position."""
    found = []
    for idx in owned_blocks(op):
        for i, inner in enumerate(program.block(idx).ops):
            found.append((idx, i, inner))
            found += _owned_ops(program, inner)
    return found


def unexportable_ops(program, ops=None, single_process: bool = False) -> list[str]:
    """One line per op (in block 0, or in ``ops`` and their sub-blocks) that cannot be exported, saying why;
    with ``single_process`` the collective ops export as one process's (see ``lower_collective``)."""
    block = program.global_block()
    ops = block.ops if ops is None else ops
    position = {id(op): i for i, op in enumerate(block.ops)}
    where = [(0, position[id(op)], op) for op in ops]
    for op in ops:
        where += _owned_ops(program, op)
    problems = []
    for b, i, op in where:
        if op.type in UNEXPORTABLE and not (single_process and op.type in lower_collective.SINGLE_PROCESS):
            problems.append(f"block {b}, op #{i} ({op.type}): {UNEXPORTABLE[op.type]}")
            continue
        if op.type not in LOWERINGS and op.type not in lower_collective.SINGLE_PROCESS:
            problems.append(f"block {b}, op #{i} ({op.type}): no ONNX lowering for this op type")
            continue
        reason = LIMITS.get(op.type, lambda _: None)(op)
        if reason:
            problems.append(f"block {b}, op #{i} ({op.type}): {reason}")
    return problems


def _lookup(params, name: str):
    if params is None:
        return None
    value = params.get(name)
    return None if value is None else np.asarray(value)


def _check_param(var, value: np.ndarray) -> str | None:
    shape_ok = len(var.shape) == value.ndim and all(d in (-1, a) for d, a in zip(var.shape, value.shape))
    if not shape_ok or value.dtype != np.dtype(var.dtype):
        return (f"param '{var.name}' is {value.dtype}{list(value.shape)} but the program declares "
                f"{var.type_str()}")
    return None


def _op_lowerer(table: Mapping[str, Any]):
    """A function lowering one op (and, through its ``Lowering``, its sub-blocks) by ``table``."""
    def lower_block(block, g: GraphBuilder, env: ChainMap) -> None:
        for op in block.ops:
            lower_op(op, g, env)

    def lower_op(op, g: GraphBuilder, env: ChainMap) -> None:
        table[op.type](Lowering(op, g, env, lower_block))
        missing = [n for names in op.outputs.values() for n in names if n not in env.maps[0]]
        if missing:  # a lowering bug, not a user mistake: say exactly where
            raise OnnxExportError(f"block {op.block.idx}, op ({op.type}): the lowering bound no value to {missing}")

    return lower_op


def export_onnx(program, path: str | os.PathLike | None = None, *, params: Mapping[str, Any] | None = None,
                fetch_list: Sequence | None = None, include_updates: bool = True,
                check: bool = True, single_process: bool = False) -> onnx.ModelProto:
    """The ONNX model of ``program``'s global block; written to ``path`` too when given.

    ``params`` (a dict or a ``Scope``) gives values of persistable vars, which become initializers;
    persistable vars without a value become graph inputs. ``fetch_list`` names the vars the model
    outputs (default: the loss a backward pass was seeded from, then vars written and never read); with
    ``include_updates`` the new value of every persistable var the program writes is an output too, named
    ``<var>@NEW``. Only the ops these
    outputs need are exported. Raises ``OnnxExportError`` listing every op that cannot be exported;
    the collective ops of a data-parallel program are among them unless ``single_process`` asks for
    the graph of one process alone (a world of one, where they move no data between processes).

        >>> model = export_onnx(main, "model.onnx", params=scope, fetch_list=[loss])
    """
    block = program.global_block()
    fetch = [_var_name(v) for v in fetch_list] if fetch_list is not None else _default_fetch(block)
    for name in fetch:
        if block.find_var(name) is None:
            raise OnnxExportError(f"fetched var '{name}' is not a var of the program's global block")
    updates = _updated(block) if include_updates else []
    ops = _needed_ops(block, fetch + updates)
    problems = unexportable_ops(program, ops, single_process)
    if problems:
        raise OnnxExportError(f"{len(problems)} op(s) cannot be exported to ONNX:\n" +
                              "\n".join(f"  - {p}" for p in problems))

    names = Names()
    g = GraphBuilder(names)
    env: ChainMap = ChainMap({})
    inputs, initializers, bad = [], [], []
    written: set[str] = set()
    for op in ops:
        for name in (n for slot in op.inputs.values() for n in slot):
            if name in written or name in env:
                continue
            _declare(block.var(name), _lookup(params, name), env, names, inputs, initializers, bad)
        written |= {n for slot in op.outputs.values() for n in slot}
    for name in fetch:
        if name not in written and name not in env:
            _declare(block.var(name), _lookup(params, name), env, names, inputs, initializers, bad)
    if bad:
        raise OnnxExportError("parameter values do not match the program:\n" + "\n".join(f"  - {b}" for b in bad))
    lower_op = _op_lowerer({**LOWERINGS, **lower_collective.SINGLE_PROCESS} if single_process else LOWERINGS)
    for op in ops:
        lower_op(op, g, env)

    outputs, taken = [], set()
    for name, out_name in [(n, n) for n in fetch] + [(n, n + UPDATED_SUFFIX) for n in updates]:
        value = env[name]
        if value != out_name or value in taken or value in {i.name for i in inputs} | {t.name for t in initializers}:
            value = g.node("Identity", [value], out=names.fresh(out_name))
        taken.add(value)
        var = block.var(name)
        outputs.append(value_info(value, var.dtype, var.shape))
    graph = helper.make_graph(g.nodes, "gradgen", inputs, outputs, initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="gradgen",
                              ir_version=IR_VERSION)
    if check:
        try:
            onnx.checker.check_model(model, full_check=True)
        except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
            raise OnnxExportError(f"the exported model fails onnx.checker (a gradgen bug): {e}") from None
    if path is not None:
        onnx.save(model, os.fspath(path))
    return model


def _declare(var, value, env, names, inputs, initializers, bad) -> None:
    """Bind a var read before any op writes it: an initializer if it has a value, else a graph input."""
    env[var.name] = names.reserve(var.name)
    if value is not None:
        problem = _check_param(var, value)
        if problem:
            bad.append(problem)
            return
        initializers.append(numpy_helper.from_array(np.array(value, order="C"), var.name))
    else:
        inputs.append(value_info(var.name, var.dtype, var.shape))
