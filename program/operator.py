"""``Operator``: one op description in a block: type, slots, attrs, provenance."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .block import Block

ROLES = ("forward", "backward", "optimize")


class Operator:
    """An op description. It holds names, not data.

    ``inputs`` and ``outputs`` map slot names to lists of var names, in the
    schema's slot order. ``attrs`` holds every attr of the schema, defaults
    filled in, as plain JSON-able values. ``role`` is forward, backward or
    optimize; ``forward_op`` is, for a generated op, the op it was made for;
    ``callsite`` is the ``file:line`` of the user code that created it.
    """

    __slots__ = ("block", "type", "inputs", "outputs", "attrs", "role", "forward_op", "callsite")

    def __init__(self, block: "Block", type: str, inputs: dict[str, list[str]], outputs: dict[str, list[str]],
                 attrs: dict[str, Any], role: str = "forward", forward_op: "Operator | None" = None,
                 callsite: str | None = None):
        self.block = block
        self.type = type
        self.inputs = inputs
        self.outputs = outputs
        self.attrs = attrs
        self.role = role
        self.forward_op = forward_op
        self.callsite = callsite

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
