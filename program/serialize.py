"""Versioned, deterministic JSON for programs, and a strict loader.

The JSON mirrors the IR one to one: blocks, their vars, their ops (slots in
schema order, attrs sorted by name, the role, the forward op a generated op
was made for as ``[block, index]``, and the creating call site). Loading
checks every field and then re-validates every op against its schema, so a
malformed or tampered file is an error, never a half-built program.
"""
from __future__ import annotations

import json
import math
from typing import Any

from .errors import GradgenError, SerializationError
from .describe import op_location
from .files import write_atomically
from .nesting import MAX_NESTING, make_room_for
from .subblocks import owned_blocks
from .validate import make_operator

FORMAT_NAME = "gradgen-program"
FORMAT_VERSION = 1


def _encode_float(v: Any) -> Any:
    # JSON has no inf/nan; spell them as strings so the text stays strict JSON.
    if isinstance(v, float) and not math.isfinite(v):
        return {"float": repr(v)}
    if isinstance(v, list):
        return [_encode_float(x) for x in v]
    return v


def _decode_float(v: Any) -> Any:
    if isinstance(v, dict) and set(v) == {"float"} and v["float"] in ("inf", "-inf", "nan"):
        return float(v["float"])
    if isinstance(v, list):
        return [_decode_float(x) for x in v]
    return v


def program_to_dict(program) -> dict:
    position = {id(op): [b.idx, i] for b in program.blocks for i, op in enumerate(b.ops)}
    blocks = []
    for b in program.blocks:
        vars_ = [
            {"name": v.name, "shape": list(v.shape), "dtype": v.dtype, "persistable": v.persistable,
             "stop_gradient": v.stop_gradient, "is_parameter": v.is_parameter, "trainable": v.trainable}
            for v in b.vars.values()
        ]
        ops = [
            {"type": op.type, "inputs": op.inputs, "outputs": op.outputs,
             "attrs": {k: _encode_float(op.attrs[k]) for k in sorted(op.attrs)}, "role": op.role,
             "forward_op": position.get(id(op.forward_op)) if op.forward_op is not None else None,
             "callsite": op.callsite}
            for op in b.ops
        ]
        blocks.append({"idx": b.idx, "parent_idx": b.parent_idx, "vars": vars_, "ops": ops})
    return {"format": FORMAT_NAME, "version": FORMAT_VERSION, "random_seed": program.random_seed, "blocks": blocks}


def program_to_json(program) -> str:
    return json.dumps(program_to_dict(program), indent=1, ensure_ascii=True, allow_nan=False) + "\n"


INT_DIGITS_MAX = 20
"""Longest integer literal a program file may hold: every int of the IR fits in 64 bits (20 digits)."""


def _reject_constant(name: str):
    raise SerializationError(f"the literal {name} is not JSON (gradgen writes non-finite floats as "
                             '{"float": "nan"} and the like)')


def _strict_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise SerializationError(f"the number {text[:40]} does not fit in a 64-bit float")
    return value


def _strict_int(text: str) -> int:
    if len(text.lstrip("-")) > INT_DIGITS_MAX:
        raise SerializationError(f"an integer literal of {len(text.lstrip('-'))} digits is too long "
                                 f"(at most {INT_DIGITS_MAX}: the IR's ints are 64-bit)")
    value = int(text)
    if not -2**63 <= value < 2**64:
        raise SerializationError(f"the integer {text} does not fit in 64 bits")
    return value


def program_from_json(text: str, source: str = "<string>", *, into):
    """Fill ``into``, a new empty Program, from strict JSON text (no NaN/Infinity literals, no overflowing numbers).

    ``Program.from_json`` and ``Program.load`` make the Program.
    """
    try:
        data = json.loads(text, parse_constant=_reject_constant, parse_float=_strict_float, parse_int=_strict_int)
    except json.JSONDecodeError as e:
        raise SerializationError(f"{source}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    except SerializationError as e:
        raise SerializationError(f"{source}: {e}") from None
    except RecursionError:
        raise SerializationError(f"{source}: JSON nested too deeply (a program file nests a few levels)") from None
    return program_from_dict(data, source, into=into)


def _field(obj: Any, key: str, kind, path: str, source: str):
    if not isinstance(obj, dict):
        raise SerializationError(f"{source}: {path} must be an object, got {type(obj).__name__}")
    if key not in obj:
        raise SerializationError(f"{source}: {path} has no field '{key}'")
    value = obj[key]
    ok = isinstance(value, kind) and not (kind in (int, (int, float)) and isinstance(value, bool))
    if not ok:
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise SerializationError(f"{source}: {path}.{key} must be {names}, got {value!r}")
    return value


def _slot_map(value: Any, path: str, source: str) -> dict[str, list[str]]:
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, list) and all(isinstance(n, str) for n in v) for k, v in value.items()):
        raise SerializationError(f"{source}: {path} must map slot names to lists of var names")
    return value


def _check_sub_block_owners(program, source: str) -> None:
    """Every block an op owns is a child of the op's own block.

    Block indices grow from parent to child, so this also rules out an op that
    owns its own block or an ancestor: printing, differentiating or running
    such a program would recurse without end.
    """
    for block in program.blocks:
        for j, op in enumerate(block.ops):
            for sub in owned_blocks(op):
                if not (isinstance(sub, int) and 0 <= sub < len(program.blocks)):
                    raise SerializationError(f"{source}: {op_location(block, j, op.type, op.callsite)} owns block "
                                             f"{sub!r}, but the program has blocks 0..{len(program.blocks) - 1}")
                if program.blocks[sub].parent_idx != block.idx:
                    raise SerializationError(
                        f"{source}: {op_location(block, j, op.type, op.callsite)} owns block {sub}, whose parent "
                        f"is block {program.blocks[sub].parent_idx}, not block {block.idx} (a sub-block must be a "
                        "child of the op's block, never the block itself or an ancestor)")


def program_from_dict(data: Any, source: str = "<dict>", *, into):
    """Rebuild a program from its dict form into ``into`` (a new empty Program), checking every field and op.

    The caller makes the Program, so this module depends on the IR and not the other way round
    (design_docs/ir.md, "Layering").
    """

    fmt = _field(data, "format", str, "program", source)
    if fmt != FORMAT_NAME:
        raise SerializationError(f"{source}: not a gradgen program (format is {fmt!r}, expected {FORMAT_NAME!r})")
    version = _field(data, "version", int, "program", source)
    if version > FORMAT_VERSION:
        raise SerializationError(f"{source}: written in program format version {version}, newer than this gradgen "
                                 f"reads (up to {FORMAT_VERSION}); upgrade gradgen")
    if version < 1:
        raise SerializationError(f"{source}: unknown program format version {version}")
    blocks = _field(data, "blocks", list, "program", source)
    if not blocks:
        raise SerializationError(f"{source}: program has no blocks")
    program = into
    program.random_seed = data.get("random_seed", 0) if isinstance(data.get("random_seed", 0), int) else 0
    depths: list[int] = []
    for i, b in enumerate(blocks):
        path = f"blocks[{i}]"
        if _field(b, "idx", int, path, source) != i:
            raise SerializationError(f"{source}: {path}.idx is {b['idx']}, expected {i}")
        parent = _field(b, "parent_idx", int, path, source)
        if not (parent == -1 if i == 0 else 0 <= parent < i):
            raise SerializationError(f"{source}: {path}.parent_idx {parent} is not an earlier block")
        depths.append(0 if i == 0 else depths[parent] + 1)
        if depths[i] > MAX_NESTING:
            raise SerializationError(f"{source}: {path} is nested {depths[i]} levels deep; gradgen supports up "
                                     f"to {MAX_NESTING}")
    make_room_for(max(depths), source)
    for i, b in enumerate(blocks):
        if i:
            program.create_block(_field(b, "parent_idx", int, f"blocks[{i}]", source))
    try:
        for i, b in enumerate(blocks):
            block = program.blocks[i]
            for j, v in enumerate(_field(b, "vars", list, f"blocks[{i}]", source)):
                path = f"blocks[{i}].vars[{j}]"
                shape = _field(v, "shape", list, path, source)
                if not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
                    raise SerializationError(f"{source}: {path}.shape must be a list of ints, got {shape!r}")
                block.create_var(_field(v, "name", str, path, source), shape, _field(v, "dtype", str, path, source),
                                 persistable=_field(v, "persistable", bool, path, source),
                                 stop_gradient=_field(v, "stop_gradient", bool, path, source),
                                 is_parameter=_field(v, "is_parameter", bool, path, source),
                                 trainable=_field(v, "trainable", bool, path, source))
        refs = []
        for i, b in enumerate(blocks):
            block = program.blocks[i]
            for j, o in enumerate(_field(b, "ops", list, f"blocks[{i}]", source)):
                path = f"blocks[{i}].ops[{j}]"
                attrs = {k: _decode_float(v) for k, v in _field(o, "attrs", dict, path, source).items()}
                callsite = o.get("callsite")
                if callsite is not None and not isinstance(callsite, str):
                    raise SerializationError(f"{source}: {path}.callsite must be a string or null")
                op = make_operator(block, j, _field(o, "type", str, path, source),
                                   _slot_map(_field(o, "inputs", dict, path, source), f"{path}.inputs", source),
                                   _slot_map(_field(o, "outputs", dict, path, source), f"{path}.outputs", source),
                                   attrs, _field(o, "role", str, path, source), None, callsite)
                block.ops.append(op)
                refs.append((op, o.get("forward_op"), path))
        _check_sub_block_owners(program, source)
        for op, ref, path in refs:
            if ref is None:
                continue
            if not (isinstance(ref, list) and len(ref) == 2 and all(isinstance(x, int) for x in ref)
                    and 0 <= ref[0] < len(program.blocks) and 0 <= ref[1] < len(program.blocks[ref[0]].ops)):
                raise SerializationError(f"{source}: {path}.forward_op {ref!r} does not name an op")
            op.forward_op = program.blocks[ref[0]].ops[ref[1]]
    except SerializationError:
        raise
    except GradgenError as e:
        raise SerializationError(f"{source}: {e}") from None
    except RecursionError:  # a dict built in Python (not parsed JSON) can nest attr lists without limit
        raise SerializationError(f"{source}: an attr value is nested too deeply") from None
    program._touch()
    return program


__all__ = [
    "FORMAT_NAME", "FORMAT_VERSION", "INT_DIGITS_MAX", "program_to_dict", "program_to_json", "program_from_json", "program_from_dict",
    "write_atomically"
]
