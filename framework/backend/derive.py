"""Deriving an engine's entries from the ops' own math (``OpSchema.compute``): what every engine does the same
way. An engine supplies only how to turn a schema into its kind of entry (a numpy kernel factory, an xla
lowering); ``with_derived`` adds one for every op that states its math, and refuses a hand-written entry for
such an op (a second copy of its math).

``compute`` takes one positional argument per input var (a duplicable slot's vars one after another), None for an
optional slot the op leaves empty, and returns one value per output slot (a tuple when the schema has several; a
list of arrays, one per var, for a duplicable slot: ``split``'s pieces); ``Call`` adapts that to an op, whose
kernel gets the arrays of its given inputs and returns the outputs it has.

A condition on the values that a run must meet (an integer divisor other than zero) is ``xp.check(ok, error)``:
an engine that computes eagerly raises ``error`` at once (``check``; or ``detail()``, naming the offending
values, where given); the xla engine, which traces, makes it a run-time check of the compiled step, failing the
run with ``error``'s words.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable, Mapping, NamedTuple

import numpy as np

from gradgen.program.dtypes import INT_DTYPES
from gradgen.program.ops import OP_SCHEMAS
from gradgen.program.schema import OpSchema

__all__ = ["Call", "call_of", "check", "uncast_inputs", "with_derived", "with_primitives"]


class Call(NamedTuple):
    """How one op calls its schema's ``compute``."""

    attrs: dict[str, Any]
    """Every attr by name: the keywords ``compute`` takes."""
    dtypes: list[np.dtype]
    """The declared dtypes of the outputs the op has."""
    args: Callable[[tuple], tuple] | None
    """The op's input arrays -> ``compute``'s positional arguments; None when they are the same."""
    pick: Callable[[Any], Any] | None
    """``compute``'s result -> the op's outputs (one value for a one-output op); None when they are the same."""


def check(ok, error: Exception, detail: Callable[[], Exception] | None = None) -> None:
    """``xp.check`` of an engine that computes eagerly (numpy, torch): raise ``error`` unless ``ok`` holds, or
    ``detail()`` where given, an exception that names the offending values (which a tracing engine cannot read:
    it states ``error``)."""
    if not ok:
        raise error if detail is None else detail()


def with_primitives(xp: SimpleNamespace, primitives: Mapping[str, Callable]) -> SimpleNamespace:
    """An engine's ``xp``: its array library's functions (``xp``) and the primitives its family modules write
    (``PRIMITIVES``: name -> function), the work an op's ``compute`` asks of an engine that no array library
    has (``xp.convolution``). A primitive may not hide a library function of the same name."""
    hidden = sorted(set(primitives) & set(vars(xp)))
    if hidden:
        raise RuntimeError(f"engine primitives named like array functions: {hidden}")
    return SimpleNamespace(**vars(xp), **primitives)


def _args(given: list[bool]) -> Callable[[tuple], tuple] | None:
    if all(given):
        return None

    def args(arrays: tuple) -> tuple:
        it = iter(arrays)
        return tuple(next(it) if g else None for g in given)

    return args


def _pick(has: list[bool]) -> Callable[[Any], Any] | None:
    if len(has) == 1 or all(has):
        return None
    kept = [k for k, h in enumerate(has) if h]
    if len(kept) == 1:
        (only,) = kept
        return lambda result: result[only]
    return lambda result: tuple(result[k] for k in kept)


def _flatten(many: list[bool], has: list[bool]) -> Callable[[Any], Any]:
    """``compute``'s result -> the op's outputs, where a duplicable output slot's value is a list of arrays (one per
    var, as ``split``'s pieces): the kept slots' arrays in order, one array alone for an op with one output var."""
    def pick(result):
        per_slot = (result,) if len(many) == 1 else result
        flat = [v for m, h, r in zip(many, has, per_slot) if h for v in (r if m else (r,))]
        return flat[0] if len(flat) == 1 else tuple(flat)

    return pick


def _outputs(schema: OpSchema, has: list[bool]) -> Callable[[Any], Any] | None:
    """``Call.pick`` of an op of ``schema`` that has the output slots ``has`` marks."""
    many = [s.duplicable for s in schema.outputs]
    return _flatten(many, has) if any(many) else _pick(has)


def call_of(schema: OpSchema, op) -> Call:
    """``Call`` of ``op`` (of type ``schema.type``), worked out once when its kernel or lowering is built."""
    return Call({name: op.attr(name) for name in schema.attrs},
                [np.dtype(op.block.var(n).dtype) for n in op.output_arg_names],
                _args([bool(op.input(s.name)) for s in schema.inputs]),
                _outputs(schema, [bool(op.output(s.name)) for s in schema.outputs]))


def _takes_integers_only(schema: OpSchema, slot: str) -> bool:
    rule = schema.dtypes.get(slot)
    while isinstance(rule, str):  # the dtype of another slot
        rule = schema.dtypes.get(rule)
    return bool(rule) and all(d in INT_DTYPES for d in rule)


def uncast_inputs(schema: OpSchema, op) -> frozenset[int]:
    """Positions, among ``op``'s given input arrays, of those an engine that casts a compute's inputs to the
    declared output dtype leaves as they are: every input of an op whose schema asks for them as given
    (``OpSchema.inputs_as_given``: ``cast`` converts them itself, ``cross_entropy`` takes integer labels), and
    those of a slot that takes integers only (ids, an index, a step: values that name things rather than take part
    in the arithmetic; int64 ids cast to a float32 output merged past 2**24, to an int32 one wrapped past
    2**31)."""
    positions, k = [], 0
    for slot in schema.inputs:
        n = len(op.input(slot.name))
        if schema.inputs_as_given or _takes_integers_only(schema, slot.name):
            positions.extend(range(k, k + n))
        k += n
    return frozenset(positions)


def with_derived(written: Mapping[str, Any], derive: Callable[[OpSchema], Any], engine: str,
                 faster: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``written`` (op type -> an engine's hand-written entry) and ``derive(schema)`` for every op that has a
    ``compute``; a RuntimeError naming the ops that have both, unless ``faster`` (op type -> the measurement
    that justifies it) says why the engine's own entry stays. Such an entry must give what the derived one
    gives; the engine's tests check it (``derived_and_faster``)."""
    faster = dict(faster or {})
    both = sorted(t for t, s in OP_SCHEMAS.items() if s.compute is not None and t in written and t not in faster)
    if both:
        raise RuntimeError(f"op types with a compute and a hand-written {engine} entry: {both}")
    stale = sorted(t for t in faster if t not in written or OP_SCHEMAS[t].compute is None)
    if stale:
        raise RuntimeError(f"'faster' {engine} entries without a hand-written entry or a compute: {stale}")
    return {**{t: derive(s) for t, s in OP_SCHEMAS.items() if s.compute is not None}, **written}
