"""``Operator``: one op description in a block: type, slots, attrs, provenance."""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

from .errors import ProgramError

if TYPE_CHECKING:
    from .block import Block

ROLES = ("forward", "backward", "optimize")


class FrozenList(list):
    """A list held by an op (a slot's var names, an attr of kind ints/floats/strs) that refuses in-place edits.

    An in-place edit would reach neither the program's version (so cached plans
    would go stale) nor, for a default attr, stay within one op. Reading,
    comparing, ``+`` and ``list(...)`` work as for a list; to change one,
    assign a new list to the op's field.
    """

    __slots__ = ()

    def _refuse(self, *args, **kwargs):
        raise ProgramError(f"an op's list {list(self)!r} cannot change in place (the change would not reach cached "
                           "plans); assign a new list instead, e.g. op.attrs['axes'] = [...] or block.set_attr(...)")

    append = extend = insert = remove = pop = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse

    def __copy__(self) -> list:
        return list(self)

    def __deepcopy__(self, memo) -> list:
        return list(self)

    def __reduce_ex__(self, protocol):
        return list, (list(self),)


def _frozen(value):
    return FrozenList(value) if type(value) is list else value


class OpFields(dict):
    """An op's ``inputs``, ``outputs`` or ``attrs``: a dict whose edits bump the program's version.

    The executor caches plans per program version, so ``op.attrs["is_test"] = True``
    after a run is seen by the next run. List values are ``FrozenList``s: replace
    them (``op.attrs["axes"] = [0, 2]``), an in-place change is refused.
    Passes edit through ``Block.set_attr`` and ``Block.rename_inputs``, which check what they change.
    """

    __slots__ = ("op",)

    def _changed(self) -> None:
        self.op.block.program._touch()

    def __setitem__(self, key, value) -> None:
        dict.__setitem__(self, key, _frozen(value))
        self._changed()

    def __delitem__(self, key) -> None:
        dict.__delitem__(self, key)
        self._changed()

    def __ior__(self, other):
        self.update(other)
        return self

    def update(self, *args, **kwargs) -> None:
        dict.update(self, {k: _frozen(v) for k, v in dict(*args, **kwargs).items()})
        self._changed()

    def pop(self, *args):
        value = dict.pop(self, *args)
        self._changed()
        return value

    def popitem(self):
        item = dict.popitem(self)
        self._changed()
        return item

    def setdefault(self, key, default=None):
        value = dict.setdefault(self, key, _frozen(default))
        self._changed()
        return value

    def clear(self) -> None:
        dict.clear(self)
        self._changed()


def _fields(op: "Operator", items: dict) -> OpFields:
    fields = OpFields({k: FrozenList(v) if type(v) is list else v for k, v in items.items()})
    fields.op = op
    return fields


def _field_property(name: str, doc: str) -> property:
    """``inputs`` / ``outputs`` / ``attrs``: assigning a whole new dict also bumps the version."""
    slot = "_" + name

    def set_(op: "Operator", value: dict) -> None:
        setattr(op, slot, _fields(op, value))
        op.block.program._touch()
    return property(operator.attrgetter(slot), set_, doc=doc)


class Operator:
    """An op description. It holds names, not data.

    ``inputs`` and ``outputs`` map slot names to lists of var names, in the
    schema's slot order. ``attrs`` holds every attr of the schema, defaults
    filled in, as plain JSON-able values. ``role`` is forward, backward or
    optimize; ``forward_op`` is, for a generated op, the op it was made for;
    ``callsite`` is the ``file:line`` of the user code that created it.
    Edits to ``inputs``, ``outputs`` and ``attrs`` bump the program's version (``OpFields``).
    """

    __slots__ = ("block", "type", "_inputs", "_outputs", "_attrs", "role", "forward_op", "callsite")

    def __init__(self, block: "Block", type: str, inputs: dict[str, list[str]], outputs: dict[str, list[str]],
                 attrs: dict[str, Any], role: str = "forward", forward_op: "Operator | None" = None,
                 callsite: str | None = None):
        self.block = block
        self.type = type
        self._inputs = _fields(self, inputs)
        self._outputs = _fields(self, outputs)
        self._attrs = _fields(self, attrs)
        self.role = role
        self.forward_op = forward_op
        self.callsite = callsite

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


__all__ = ["Operator", "OpFields", "FrozenList", "ROLES"]
