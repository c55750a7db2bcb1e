"""The text form of a program: what ``print(program)`` shows.

One op per line, outputs with their dtype and shape, inputs by slot, the
attrs that differ from the schema's defaults; ops grouped by role; each
generated op names the forward op it was made for; sub-blocks are printed
indented under the op that owns them.
"""
from __future__ import annotations

from .ops import OP_SCHEMAS
from .provenance import op_provenance, producers
from .subblocks import owned_blocks


def _format_value(v) -> str:
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(_format_value(x) for x in v) + "]"
    if isinstance(v, str):
        return repr(v)
    return str(v)


def format_op(op, index: int, positions: dict | None = None, made_by: dict | None = None) -> str:
    """``#3 relu_0: float64[-1, 100] = relu(X=matmul_0)  <- grad of #1 relu``.

    ``made_by`` (``provenance.producers(op.block)``) lets sums and updates name the ops they read from.
    """
    block = op.block
    outs = []
    multi = len(op.outputs) > 1
    for slot, names in op.outputs.items():
        typed = ", ".join(f"{n}: {block.var(n).type_str()}" if block.has_var(n) else n for n in names)
        if len(names) > 1:
            typed = f"[{typed}]"
        outs.append(f"{slot}={typed}" if multi else typed)
    args = []
    for slot, names in op.inputs.items():
        shown = names[0] if len(names) == 1 else "[" + ", ".join(names) + "]"
        args.append(f"{slot}={shown}")
    schema = OP_SCHEMAS.get(op.type)
    for name in sorted(op.attrs):
        spec = schema.attrs.get(name) if schema else None
        if spec is not None and _is_default(op.attrs[name], spec.default):
            continue
        args.append(f"{name}={_format_value(op.attrs[name])}")
    line = f"#{index} {', '.join(outs) or '()'} = {op.type}({', '.join(args)})"
    origin = op_provenance(op, index, positions or {}, made_by if made_by is not None else producers(block))
    if origin.text and origin.kind != "seed":
        line += f"  <- {origin.text}"
    return line


def _is_default(value, default) -> bool:
    """Equal and of one kind (1 is not 1.0 nor True); an op's list attrs are tracked list subclasses, still lists."""
    kind = [list if issubclass(type(v), list) else type(v) for v in (value, default)]
    return value == default and kind[0] is kind[1]


def _var_flags(var) -> str:
    flags = []
    if var.is_parameter:
        flags.append("parameter" if var.trainable else "parameter(frozen)")
    elif var.persistable:
        flags.append("persistable")
    if var.stop_gradient and not var.is_parameter:
        flags.append("stop_gradient")
    return ", ".join(flags)


def block_to_lines(block, indent: str, positions: dict, owned: set[int]) -> list[str]:
    lines = []
    produced = {n for op in block.ops for n in op.output_arg_names}
    declared = [v for v in block.vars.values() if v.name not in produced or v.persistable]
    if declared:
        width = max(len(v.name) for v in declared)
        lines.append(f"{indent}vars:")
        for v in declared:
            flags = _var_flags(v)
            lines.append(f"{indent}  {v.name.ljust(width)}  {v.type_str()}" + (f"  ({flags})" if flags else ""))
    role = None
    made_by = producers(block)
    for i, op in enumerate(block.ops):
        if op.role != role:
            role = op.role
            lines.append(f"{indent}{role}:")
        lines.append(f"{indent}  {format_op(op, i, positions, made_by)}")
        for sub in owned_blocks(op):
            if 0 <= sub < len(block.program.blocks):
                child = block.program.blocks[sub]
                lines.append(f"{indent}    block {sub} (parent {child.parent_idx}):")
                lines.extend(block_to_lines(child, indent + "      ", positions, owned))
    return lines


def program_to_text(program) -> str:
    """The whole program as text; blocks owned by an op appear nested under it."""
    positions = {id(op): (b.idx, i) for b in program.blocks for i, op in enumerate(b.ops)}
    owned = {sub for b in program.blocks for op in b.ops for sub in owned_blocks(op)}
    n = len(program.blocks)
    lines = [f"program ({n} block{'s' if n != 1 else ''})"]
    for block in program.blocks:
        if block.idx in owned:
            continue
        title = "global" if block.idx == 0 else f"parent {block.parent_idx}"
        lines.append(f"block {block.idx} ({title}):")
        lines.extend(block_to_lines(block, "  ", positions, owned))
    return "\n".join(lines) + "\n"


__all__ = ["format_op", "block_to_lines", "program_to_text"]
