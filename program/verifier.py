"""``verify``: check a whole program and report every problem, not just the first.

A program built through ``Block.append_op`` is checked op by op as it grows;
``verify`` re-checks the whole thing after edits, passes or loading, and also
checks what no single op can see: that each input exists before it is read,
that sub-block references are sound, and that generated ops point at real
forward ops.
"""
from __future__ import annotations

from .describe import op_location
from .errors import OpError, VerificationError
from .graph import dataflow_graph
from .schema import TensorType
from .shapes import format_shape, shapes_agree
from .subblocks import external_reads, owned_blocks
from .validate import normalize_slots, infer_types, lookup_schema, normalize_attrs


def _op_problems(block, index: int, op) -> list[str]:
    """The op checked against its schema, without changing the block."""
    where = op_location(block, index, op.type, op.callsite)
    try:
        schema = lookup_schema(where, op.type)
        ins = normalize_slots(block, where, op.inputs, schema, "input")
        outs = normalize_slots(block, where, op.outputs, schema, "output")
        attrs = normalize_attrs(where, schema, op.attrs)
        inferred = infer_types(block, where, schema, ins, attrs)
    except OpError as e:
        return [str(e)]
    problems = []
    for slot, names in outs.items():
        types = inferred.get(slot, [])
        if len(types) != len(names):
            problems.append(f"{where}: output slot '{slot}' names {len(names)} var(s) but the op makes {len(types)}")
            continue
        for name, t in zip(names, types):
            var = block.find_var(name)
            if var is None:
                problems.append(f"{where}: output {slot}={name} is not declared in block {block.idx} or its ancestors")
            elif var.dtype != t.dtype or not shapes_agree(var.shape, t.shape):
                problems.append(f"{where}: output {slot}={name} is declared {var.type_str()} but the op makes "
                                f"{TensorType(t.shape, t.dtype).dtype}{format_shape(t.shape)}")
    for kind_name, spec in schema.attrs.items():
        if spec.kind == "block" and kind_name in op.attrs:
            sub = op.attrs[kind_name]
            if not 0 <= sub < len(block.program.blocks):
                problems.append(f"{where}: attr '{kind_name}' names block {sub}, but the program has "
                                f"{len(block.program.blocks)} blocks")
            elif block.program.blocks[sub].parent_idx != block.idx:
                problems.append(f"{where}: attr '{kind_name}' names block {sub}, whose parent is block "
                                f"{block.program.blocks[sub].parent_idx}, not block {block.idx}")
    return problems + _sub_block_problems(block, where, op)


def _sub_block_problems(block, where: str, op) -> list[str]:
    """A control-flow op's blocks read only outer vars listed in its Input slot and write only their own."""
    owned = [b for b in owned_blocks(op) if 0 <= b < len(block.program.blocks)]
    if not owned:
        return []
    problems = []
    listed = set(op.input("Input"))
    sub_blocks = [block.program.blocks[b] for b in owned]
    for name in external_reads(sub_blocks):
        if name not in listed:
            problems.append(f"{where}: its sub-blocks read '{name}' from an enclosing block, but its Input slot "
                            "does not list it")
    for sub in sub_blocks:
        for j, inner in enumerate(sub.ops):
            for name in inner.output_arg_names:
                if name not in sub.vars:
                    problems.append(f"{op_location(sub, j, inner.type, inner.callsite)}: writes '{name}', a var of "
                                    "an enclosing block (sub-blocks only write their own vars)")
    return problems


def _use_before_definition(block) -> list[str]:
    """Ops reading a var's value from before any write, when a later op of the block is what writes it.

    On the versioned dataflow graph this is an edge from version 0 of a var
    that also has a version 1 (some op writes it) and is not persistable.
    """
    graph = dataflow_graph(block)
    problems = []
    for node in graph:
        if node[0] != "var" or node[2] != 0 or not graph.has_node(("var", node[1], 1)):
            continue
        var = block.find_var(node[1])
        if var is not None and var.persistable:
            continue
        (writer,) = graph.predecessors(("var", node[1], 1))
        for reader in sorted(graph.successors(node)):
            op = block.ops[reader[1]]
            problems.append(f"{op_location(block, reader[1], op.type, op.callsite)}: reads '{node[1]}' before op "
                            f"#{writer[1]} ({block.ops[writer[1]].type}) writes it, and nothing feeds it")
    return problems


def verify(program, raise_on_error: bool = True) -> list[str]:
    """Every problem of ``program`` as a list of messages (empty when it is sound).

    >>> verify(main)                      # raises VerificationError listing all problems
    >>> problems = verify(main, raise_on_error=False)
    """
    problems: list[str] = []
    positions = {id(op) for b in program.blocks for op in b.ops}
    for block in program.blocks:
        if block.idx and not 0 <= block.parent_idx < block.idx:
            problems.append(f"block {block.idx}: parent_idx {block.parent_idx} is not an earlier block")
        problems += _use_before_definition(block)
        for i, op in enumerate(block.ops):
            problems += _op_problems(block, i, op)
            if op.forward_op is not None and id(op.forward_op) not in positions:
                problems.append(f"{op_location(block, i, op.type, op.callsite)}: made for a forward op "
                                f"({op.forward_op.type}) that is no longer in the program")
    if problems and raise_on_error:
        raise VerificationError(problems)
    return problems


__all__ = ["verify"]
