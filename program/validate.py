"""Building an ``Operator`` checked against its schema, and typing its outputs.

``make_operator`` is the one door through which ops enter a block: it
normalizes slots to lists of names, checks slots and attrs against the
schema, runs compile-time shape inference, and creates (or checks) the
output vars. Every failure is an ``OpError`` that names the block, the op
index and type, and the vars with their shapes.
"""
from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any, Mapping

from .describe import describe_slots, op_location
from .dtypes import describe_dtypes
from .errors import OpError, ProgramError, ShapeInferenceError
from .operator import ROLES, Operator
from .ops import OP_SCHEMAS
from .schema import ATTR_KINDS, InferContext, OpSchema, TensorType
from .shapes import format_shape, shapes_agree
from .tracked import FrozenList
from .variable import Variable

if TYPE_CHECKING:
    from .block import Block

_tensor_type = tuple.__new__
"""``_tensor_type(TensorType, (shape, dtype))`` builds a TensorType without the Python-level ``__new__`` frame."""


class _Location(tuple):
    """``(block, index, op_type, callsite)``, shown as ``op_location`` gives it.

    Checks put it at the head of their messages; formatting it only when one
    fails saves that cost on every op that passes.
    """

    __slots__ = ()

    def __str__(self) -> str:
        return op_location(*self)


def _names(block: "Block", where, kind: str, slot: str, value) -> FrozenList:
    """A slot value (a Variable, a name, or a list of them) as a new list of names, frozen as the op keeps it.

    A Variable of this program is its name; the check is inline, as builders pass Variables on every op."""
    program = block.program
    if isinstance(value, (list, tuple)):
        names = FrozenList(value)
        for v in names:  # usually all names already: one copy and a check, no comprehension
            if not isinstance(v, str):
                return FrozenList([v if isinstance(v, str) else v.name if type(v) is Variable
                                   and v.block.program is program else _var_name(block, where, kind, slot, v)
                                   for v in value])
        return names
    if isinstance(value, str):
        return FrozenList((value,))
    if type(value) is Variable and value.block.program is program:
        return FrozenList((value.name,))
    return FrozenList((_var_name(block, where, kind, slot, value),))


def _var_name(block: "Block", where, kind: str, slot: str, value) -> str:
    """The name a slot value other than a str or a Variable of this program stands for, or the error it is."""
    if isinstance(value, Variable):
        return own_name(block, value, f"{where}: {kind} slot '{slot}'")
    raise OpError(f"{where}: {kind} slot '{slot}' holds a {type(value).__name__} ({value!r:.80}); "
                  "a slot holds var names (str) or Variables")


def own_name(block: "Block", var: Variable, what: str) -> str:
    """``var.name``, once ``var`` is known to be a var of ``block``'s program (or of a program it was cloned from,
    whose var of that name here has the same type); otherwise a ProgramError naming both programs' vars.

    A Variable stands for its name only inside its own program: looked up by name elsewhere it would silently
    be another var, perhaps of another dtype and shape."""
    program = block.program
    home = var.block.program
    if home is program:
        return var.name
    own = block.find_var(var.name)
    if own is not None and program.descends_from(home) and own.type_str() == var.type_str():
        return var.name
    here = (f"this program's own '{var.name}' is {own.type_str()}" if own is not None
            else f"this program has no var named '{var.name}'")
    raise ProgramError(f"{what}: '{var.name}' ({var.type_str()}) is a var of another program, not of the program "
                       f"being built; {here}. Use the vars of the program being built (or build in the other one)")


def _suggest(word: str, choices) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def normalize_slots(block: "Block", where: str, given: Mapping[str, Any] | None, schema: OpSchema,
                    kind: str) -> dict[str, list[str]]:
    """``kind`` ("input" or "output") slots of ``given`` as ``slot -> [names]`` in schema order, checked."""
    known = schema.tables.inputs if kind == "input" else schema.tables.outputs
    given = given or {}
    if not given.keys() <= known.keys():
        for name in given:
            if name not in known:
                raise OpError(f"{where}: unknown {kind} slot '{name}'{_suggest(name, known)} "
                              f"(valid: {', '.join(known) or 'none'})")
    out: dict[str, list[str]] = {}
    for name, slot in known.items():
        value = given.get(name)
        names = [] if value is None else _names(block, where, kind, name, value)
        if not names:
            if not slot.optional:
                raise OpError(f"{where}: missing {kind} slot '{name}'")
            continue
        if not slot.duplicable and len(names) != 1:
            raise OpError(f"{where}: {kind} slot '{name}' takes one var, got {len(names)}: {names}")
        out[name] = names
    return out


def normalize_attrs(where: str, schema: OpSchema, attrs: Mapping[str, Any] | None) -> dict[str, Any]:
    """Check attr names and kinds, coerce to canonical values, fill defaults; sorted by name."""
    tables = schema.tables
    if not attrs and not tables.required:
        return dict(tables.defaults)  # the same dict the loop below builds when nothing is given
    attrs = attrs or {}
    for name in attrs:
        if name not in schema.attrs:
            raise OpError(f"{where}: unknown attr '{name}'{_suggest(name, schema.attrs)} "
                          f"(valid: {', '.join(schema.attrs) or 'none'})")
    out = {}
    for name in tables.attr_names:
        if name in attrs:
            out[name] = coerce_attr(where, name, schema.attrs[name].kind, attrs[name])
        elif name in tables.defaults:
            out[name] = tables.defaults[name]
        else:
            raise OpError(f"{where}: missing required attr '{name}' ({schema.attrs[name].kind})")
    return out


def coerce_attr(where: str, name: str, kind: str, value: Any) -> Any:
    """``value`` as the canonical JSON value of attr kind ``kind``; an OpError naming the attr if it is not one."""
    try:
        return ATTR_KINDS[kind](value)
    except (TypeError, ValueError):
        raise OpError(f"{where}: attr '{name}' must be of kind {kind}, got {value!r}") from None


def lookup_schema(where: str, op_type: str) -> OpSchema:
    schema = OP_SCHEMAS.get(op_type)
    if schema is None:
        raise OpError(f"{where}: unknown op type '{op_type}'{_suggest(op_type, OP_SCHEMAS)}; if it is a user-defined "
                      "op, register it first with gradgen.framework.register_op (for the gradgen command: --ops FILE)")
    return schema


def dtype_problem(schema: OpSchema, types: Mapping[str, list[TensorType]], attrs: Mapping[str, Any]) -> str | None:
    """What in these input types and attrs breaks ``schema.dtypes`` (the first thing found), or None."""
    for key, rule in schema.dtypes.items():
        if key in attrs:  # an attr of kind dtype; "" (an optional one left out) means "like the input"
            if attrs[key] and attrs[key] not in rule:
                return f"attr {key} must be {describe_dtypes(rule)}, got {attrs[key]}"
            continue
        if isinstance(rule, str):
            ref = types.get(rule)
            for t in types.get(key, ()) if ref else ():
                if t.dtype != ref[0].dtype:
                    return (f"dtypes differ: {ref[0].dtype} vs {t.dtype} ({key} must have the dtype of {rule}; "
                            "cast one of them first)")
            continue
        for t in types.get(key, ()):
            if t.dtype not in rule:
                return f"{key} must be {describe_dtypes(rule)}, got {t.dtype}"
    return None


def infer_types(block: "Block", where: str, schema: OpSchema, inputs: dict[str, list[str]],
                attrs: dict[str, Any]) -> dict[str, list[TensorType]]:
    """Run the schema's shape inference; returns a list of output types per slot."""
    local = block.vars
    types = {}
    for slot, names in inputs.items():
        ts = []
        for n in names:
            var = local.get(n)
            if var is None:  # a Variable has no truth value (layers/operators.py), so no `or` here
                var = block.find_var(n)
            if var is None:
                raise OpError(f"{where}: input {slot}={n} is not defined in block {block.idx} or its ancestors")
            ts.append(_tensor_type(TensorType, (var.shape, var.dtype)))
        types[slot] = ts
    problem = dtype_problem(schema, types, attrs) if schema.dtypes else None
    if problem is not None:
        raise OpError(f"{where}: {problem} (inputs: {describe_slots(block, inputs)})")
    try:
        result = schema.infer(InferContext(schema.type, types, attrs, block.program))
    except ShapeInferenceError as e:
        raise OpError(f"{where}: {e} (inputs: {describe_slots(block, inputs)})") from None
    out = {}
    for slot, t in result.items():
        out[slot] = list(t) if isinstance(t, list) else [t]
    return out


def make_operator(block: "Block", index: int, op_type: str, inputs=None, outputs=None, attrs=None,
                  role: str = "forward", forward_op: Operator | None = None, callsite: str | None = None) -> Operator:
    """A schema-checked Operator for ``block`` at ``index``; creates missing output vars."""
    where = _Location((block, index, op_type, callsite))
    schema = OP_SCHEMAS.get(op_type) or lookup_schema(where, op_type)
    if role not in ROLES:
        raise OpError(f"{where}: unknown role '{role}' (valid: {', '.join(ROLES)})")
    ins = normalize_slots(block, where, inputs, schema, "input")
    outs = normalize_slots(block, where, outputs, schema, "output")
    norm_attrs = normalize_attrs(where, schema, attrs)
    inferred = infer_types(block, where, schema, ins, norm_attrs)
    for slot, names in outs.items():
        types = inferred.get(slot)
        if types is None or len(types) != len(names):
            raise OpError(f"{where}: output slot '{slot}' names {len(names)} var(s) but the op makes "
                          f"{0 if types is None else len(types)}")
        for name, t in zip(names, types):
            _bind_output(block, where, slot, name, t)
    return Operator(block, op_type, ins, outs, norm_attrs, role, forward_op, callsite)


def _bind_output(block: "Block", where: str, slot: str, name: str, t: TensorType) -> None:
    var = block.vars.get(name)
    if var is None and block.parent_idx >= 0:
        var = block.find_var(name)
    if var is None:
        block.create_var(name, t.shape, t.dtype)
        return
    if var.dtype != t.dtype or not shapes_agree(var.shape, t.shape):
        raise OpError(f"{where}: output {slot}={name} is declared {var.type_str()} but the op makes "
                      f"{t.dtype}{format_shape(t.shape)}")


__all__ = ["own_name", "normalize_slots", "normalize_attrs", "coerce_attr", "lookup_schema", "dtype_problem",
           "infer_types", "make_operator"]
