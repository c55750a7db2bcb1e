"""The plain data behind the explain page: ops with their links, vars with their facts, the memory timeline.

Everything the page shows is computed here, in Python, as JSON-able dicts and
lists; the page's script only draws and highlights. So this is what the unit
tests check, and the browser test only checks that the page shows it.

Op ids are ``"b{block}o{index}"``; a var is named by ``(block, name)`` where
``block`` is the block that declares it.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from gradgen.program.errors import GradgenError
from gradgen.program.printer import format_op
from gradgen.program.provenance import op_provenance, producers
from gradgen.program.subblocks import owned_blocks

from ..memory import MADE_KINDS, analyze_memory, peak_sentence, unsized_sentence
from ..summary import batch_size, format_bytes, resolve_shape
from ..var_kinds import KIND_MEANING, KIND_PLURAL, KINDS, block_kinds, is_gradient_name
from .what_if import recompute_what_if


def op_id(block: int, index: int) -> str:
    return f"b{block}o{index}"


def default_feed_shapes(program, batch: int = 1) -> dict[str, list[int]]:
    """Shapes for the global block's data vars with every -1 taken as ``batch``: a page needs some size to show."""
    block = program.global_block()
    written = {n for op in block.ops for n in op.output_arg_names}
    read = {n for op in block.ops for n in op.input_arg_names}
    return {v.name: [batch if d == -1 else d for d in v.shape] for v in block.vars.values()
            if not v.persistable and v.name not in written and v.name in read}


def _loss_names(block) -> list[str]:
    """The targets the backward part was seeded for (``fill_any_like`` seeds), fetched so they stay alive."""
    return [op.input("X")[0] for op in block.ops if op.role == "backward" and op.type == "fill_any_like"
            and op.forward_op is None and op.input("X")]


def _var_bytes(var, batch: int | None) -> int | None:
    shape = resolve_shape(var.shape, batch)
    return None if shape is None else int(np.prod(shape, dtype=np.int64)) * np.dtype(var.dtype).itemsize


def _row(program, block, refs, copies: dict, rows: dict) -> str | None:
    """The forward op of ``block`` a generated op sits beside: the forward op it links to; for a sum or an
    update, the row of the op it links to; when the linked op is in another block (a gradient sub-block
    differentiates copies of a body's ops), this block's copy of it."""
    for b, i in refs:
        if b == block.idx:
            return op_id(b, i) if block.ops[i].role == "forward" else rows.get(op_id(b, i))
        original = program.blocks[b].ops[i]
        copy = copies.get((original.type, tuple(original.output_arg_names)))
        if copy is not None:
            return copy
    return None


def _block_model(program, block, positions, batch, back_links) -> dict[str, Any]:
    made_by = producers(block)
    kinds = block_kinds(block)
    ops, readers, writers, rows = [], {}, {}, {}
    copies = {(op.type, tuple(op.output_arg_names)): op_id(block.idx, i)
              for i, op in enumerate(block.ops) if op.role == "forward"}
    for i, op in enumerate(block.ops):
        origin = op_provenance(op, i, positions, made_by)
        refs = [op_id(*r) for r in origin.refs]
        row = rows[op_id(block.idx, i)] = _row(program, block, origin.refs, copies, rows)
        for r in refs:
            back_links.setdefault(r, []).append(op_id(block.idx, i))
        ops.append({"id": op_id(block.idx, i), "index": i, "type": op.type, "role": op.role,
                    "text": format_op(op, i, positions, made_by), "origin": origin.kind, "origin_text": origin.text,
                    "links": refs, "row": row, "ins": op.input_arg_names, "outs": op.output_arg_names,
                    "blocks": [b for b in owned_blocks(op) if 0 <= b < len(program.blocks)],
                    "callsite": op.callsite or ""})
        for n in op.input_arg_names:
            readers.setdefault(n, []).append(op_id(block.idx, i))
        for n in op.output_arg_names:
            writers.setdefault(n, []).append(op_id(block.idx, i))
    vars_ = {}
    for name in dict.fromkeys([*block.vars, *readers, *writers]):
        var = block.find_var(name)
        if var is None:
            continue
        base = name.split("@GRAD")[0]
        vars_[name] = {"name": name, "type": var.type_str(), "bytes": _var_bytes(var, batch),
                       "kind": kinds.made.get(name) or kinds.resting.get(name) or "declared",
                       "made_by": writers.get(name, []), "read_by": readers.get(name, []),
                       "last_reader": (readers.get(name) or [None])[-1],
                       "grad_of": base if is_gradient_name(name) and block.find_var(base) is not None else None,
                       "persistable": var.persistable, "parameter": var.is_parameter}
    return {"idx": block.idx, "parent": block.parent_idx, "ops": ops, "vars": vars_}


def _memory_model(program, feed_shapes, fetch) -> dict[str, Any]:
    report = analyze_memory(program, feed_shapes, fetch)
    resting = [report.resting_by_kind.get(k, 0) for k in ("parameter", "feed", "optimizer state")]
    # The chart stacks the bytes live while each step runs: the peak is one of its points, and its top.
    steps = [{"op": op_id(0, k), "label": label, "bytes": sum(kd), "kinds": list(resting) + list(kd)}
             for k, label, kd in zip(report.op_index, report.labels, report.kinds_during)]
    at_peak = [{"name": n, "bytes": b, "kind": report.kind.get(n, "?"),
                "keeper": op_id(0, report.op_index[report.keeper[n]]) if n in report.keeper else None}
               for n, b in report.at_peak]
    largest = max(report.peak_by_kind.items(), key=lambda kv: kv[1], default=(None, 0))
    answer = (f"At the peak, {100 * largest[1] / report.peak_bytes:.0f}% of what the run made is {KIND_PLURAL[largest[0]]} "
              f"({KIND_MEANING[largest[0]]})." if largest[0] and report.peak_bytes else "")
    if largest[0] == "activation" and len(fetch) == 1:
        what_if = recompute_what_if(program, feed_shapes, fetch[0])
        if what_if is not None:
            answer += (f" Recomputing with {len(what_if.checkpoints)} checkpoints (append_backward(loss, "
                       f"checkpoints=[{', '.join(what_if.checkpoints)}])) would take the backward pass's peak from "
                       f"{format_bytes(what_if.peak_without)} to {format_bytes(what_if.peak_with)}.")
    return {"kinds": ["parameter", "feed", "optimizer state", *MADE_KINDS], "steps": steps,
            "peak_step": report.peak_op, "peak_bytes": report.peak_bytes,
            "peak_op": op_id(0, report.op_index[report.peak_op]) if report.peak_op >= 0 else None,
            "resting_bytes": report.resting_bytes, "at_peak": at_peak,
            "sentence": "Peak: " + peak_sentence(report) + ". " + answer
                        + (f" {unsized_sentence(report).capitalize()}." if report.unsized else ""),
            "feed_shapes": {k: list(v) for k, v in feed_shapes.items()}, "fetched": list(fetch)}


def page_model(program, feed_shapes: Mapping[str, Sequence[int]] | None = None) -> dict[str, Any]:
    """Everything the explain page shows about ``program``, as plain data.

    ``feed_shapes`` sizes the -1 dims for the memory timeline; data vars not given take the batch size of
    those given (default 1).
    """
    given = dict(feed_shapes or {})
    shapes = {**default_feed_shapes(program, batch_size(program.global_block(), given) or 1), **given}
    positions = {id(op): (b.idx, i) for b in program.blocks for i, op in enumerate(b.ops)}
    batch = batch_size(program.global_block(), shapes)
    back_links: dict[str, list[str]] = {}
    blocks = [_block_model(program, b, positions, batch, back_links) for b in program.blocks]
    for b in blocks:
        for op in b["ops"]:
            op["linked_from"] = back_links.get(op["id"], [])
    owned = {s for b in blocks for op in b["ops"] for s in op["blocks"]}
    try:
        memory = _memory_model(program, shapes, _loss_names(program.global_block()))
        memory_error = None
    except (GradgenError, ValueError) as e:  # the page still explains the ops when the run cannot be planned
        memory, memory_error = None, f"{type(e).__name__}: {e}"
    return {"blocks": blocks, "roots": [b["idx"] for b in blocks if b["idx"] not in owned],
            "memory": memory, "memory_error": memory_error, "kinds": list(KINDS),
            "kind_meaning": KIND_MEANING}


__all__ = ["page_model", "default_feed_shapes", "op_id"]
