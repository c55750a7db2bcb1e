"""``Operator``: one op description in a block: type, slots, attrs, provenance."""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

from .errors import ProgramError
from .tracked import TrackedDict, tracked_dict

if TYPE_CHECKING:
    from .block import Block

ROLES = ("forward", "backward", "optimize", "forward_grad")


def _field_property(name: str, doc: str) -> property:
    """``inputs`` / ``outputs`` / ``attrs``: a TrackedDict; assigning a whole new dict bumps the version too."""
    slot = "_" + name

    def set_(op: "Operator", value: dict) -> None:
        setattr(op, slot, tracked_dict(value, op.block.program))
        op.block.program._touch()
    return property(operator.attrgetter(slot), set_, doc=doc)


def _refuse_type(op: "Operator", value) -> None:
    raise ProgramError(f"an op's type is fixed ({op.type} -> {value!r}); remove the op and insert a new one")


class Operator:
    """An op description. It holds names, not data.

    ``inputs`` and ``outputs`` map slot names to lists of var names, in the
    schema's slot order. ``attrs`` holds every attr of the schema, defaults
    filled in, as plain JSON-able values. ``role`` is forward, backward,
    optimize or forward_grad (forward-mode tangent ops); ``forward_op`` is,
    for a generated op, the op it was made for; ``callsite`` is the ``file:line`` of the user code that created it.
    ``inputs``, ``outputs`` and ``attrs`` are TrackedDicts: edits bump the
    program's version, and their lists are FrozenLists (``program/tracked.py``).
    """

    __slots__ = ("block", "_type", "_inputs", "_outputs", "_attrs", "role", "forward_op", "callsite")

    def __init__(self, block: "Block", type: str, inputs: dict[str, list[str]], outputs: dict[str, list[str]],
                 attrs: dict[str, Any], role: str = "forward", forward_op: "Operator | None" = None,
                 callsite: str | None = None):
        self.block = block
        self._type = type
        # make_operator, the one caller, hands over FrozenList values already: wrap without a scan.
        program = block.program
        self._inputs = fields = TrackedDict(inputs)
        fields.program = program
        self._outputs = fields = TrackedDict(outputs)
        fields.program = program
        self._attrs = fields = TrackedDict(attrs)
        fields.program = program
        self.role = role
        self.forward_op = forward_op
        self.callsite = callsite

    type = property(operator.attrgetter("_type"), _refuse_type, doc="The op type, a key of ``OP_SCHEMAS``.")
    inputs = _field_property("inputs", "Input slot -> [var names], in the schema's slot order.")
    outputs = _field_property("outputs", "Output slot -> [var names], in the schema's slot order.")
    attrs = _field_property("attrs", "Attr name -> JSON-able value, every attr of the schema, sorted by name.")

    def input(self, slot: str) -> list[str]:
        """Var names in input ``slot`` (empty when the slot is absent)."""
        return self.inputs.get(slot, [])

    def output(self, slot: str) -> list[str]:
        """Var names in output ``slot`` (empty when the slot is absent)."""
        return self.outputs.get(slot, [])

    def attr(self, name: str) -> Any:
        return self.attrs[name]

    @property
    def input_arg_names(self) -> list[str]:
        return [n for names in self.inputs.values() for n in names]

    @property
    def output_arg_names(self) -> list[str]:
        return [n for names in self.outputs.values() for n in names]

    @property
    def idx(self) -> int:
        """This op's position in its block (a linear search: for messages, not loops)."""
        return self.block.ops.index(self)

    def __repr__(self) -> str:
        ins = ", ".join(f"{k}={v}" for k, v in self.inputs.items())
        outs = ", ".join(f"{k}={v}" for k, v in self.outputs.items())
        return f"Operator({self.type}: {ins} -> {outs})"


__all__ = ["Operator", "ROLES"]
