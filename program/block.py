"""``Block``: an ordered list of ops and the vars they use; sub-blocks have a parent."""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from .callsite import user_callsite
from .describe import OpPlace
from .dtypes import normalize_dtype
from .errors import OpError, ProgramError
from .operator import Operator
from .tracked import tracked_dict, tracked_list
from .validate import coerce_attr, lookup_schema, make_operator
from .variable import Variable

if TYPE_CHECKING:
    from .program import Program


class Block:
    """Ops in execution order and vars by name.

    ``var(name)`` also looks in ancestor blocks, so an op in a sub-block can
    read a var of the block that owns it. Passes edit through the methods
    here, which check what they change. ``ops`` and ``vars`` are tracked
    containers (``program/tracked.py``), so any edit, by a method or by hand,
    bumps the program's version (the executor's plans depend on it).
    """

    def __init__(self, program: "Program", idx: int, parent_idx: int = -1):
        self.program = program
        self.idx = idx
        self.parent_idx = parent_idx
        self.ops: list[Operator] = tracked_list((), program)
        self.vars: dict[str, Variable] = tracked_dict({}, program)

    @property
    def parent(self) -> "Block | None":
        return self.program.blocks[self.parent_idx] if self.parent_idx >= 0 else None

    def find_var(self, name: str) -> Variable | None:
        """The var named ``name`` here or in an ancestor block, or None."""
        block = self
        while block is not None:
            var = block.vars.get(name)
            if var is not None:
                return var
            block = block.parent
        return None

    def var(self, name: str) -> Variable:
        """The var named ``name`` here or in an ancestor block; a ProgramError if none."""
        var = self.find_var(name)
        if var is None:
            raise ProgramError(f"block {self.idx}: no var named '{name}' here or in an ancestor block")
        return var

    def has_var(self, name: str) -> bool:
        return self.find_var(name) is not None

    def create_var(self, name: str, shape: Iterable[int] = (), dtype="float32", persistable: bool = False,
                   stop_gradient: bool = False, is_parameter: bool = False, trainable: bool = True) -> Variable:
        """Declare a new var in this block; a ProgramError if the name is taken here."""
        if not isinstance(name, str) or not name:
            raise ProgramError(f"block {self.idx}: a var name must be a non-empty string, got {name!r}")
        if name in self.vars:
            raise ProgramError(f"block {self.idx}: a var named '{name}' already exists ({self.vars[name].type_str()})")
        try:
            shape = tuple(map(operator.index, shape))
        except TypeError:
            raise ProgramError(f"block {self.idx}: var '{name}' has an invalid shape {shape!r} "
                               "(a list of ints)") from None
        if shape and min(shape) < -1:
            raise ProgramError(f"block {self.idx}: var '{name}' has an invalid shape {list(shape)} "
                               "(dims are >= 0 or -1)")
        var = Variable(self, name, shape, normalize_dtype(dtype), persistable, stop_gradient, is_parameter, trainable)
        self.vars[name] = var
        return var

    def append_op(self, type: str, inputs=None, outputs=None, attrs=None, *, role: str = "forward",
                  forward_op: Operator | None = None, callsite: str | None = None) -> Operator:
        """Validate an op against its schema, create its missing output vars, append it."""
        if callsite is None:
            callsite = user_callsite()
        op = make_operator(self, len(self.ops), type, inputs, outputs, attrs, role, forward_op, callsite)
        self.ops.append(op)
        return op

    def insert_op(self, index: int, type: str, inputs=None, outputs=None, attrs=None, *, role: str = "forward",
                  forward_op: Operator | None = None, callsite: str | None = None) -> Operator:
        """Like ``append_op`` but at position ``index``."""
        if not 0 <= index <= len(self.ops):
            raise ProgramError(f"block {self.idx}: cannot insert an op at index {index} "
                               f"(block has {len(self.ops)} ops)")
        if callsite is None:
            callsite = user_callsite()
        op = make_operator(self, index, type, inputs, outputs, attrs, role, forward_op, callsite)
        if index == len(self.ops):
            self.ops.append(op)
        else:
            self.ops.insert(index, op)
        return op

    def remove_op(self, index: int) -> Operator:
        """Remove and return the op at ``index`` (its vars stay declared)."""
        if not 0 <= index < len(self.ops):
            raise ProgramError(f"block {self.idx}: no op at index {index} (block has {len(self.ops)} ops)")
        op = self.ops.pop(index)
        return op

    def remove_ops(self, indices: Iterable[int]) -> list[Operator]:
        """Remove the ops at ``indices`` in one sweep (linear in the block's size); returns them in order."""
        doomed = set(indices)
        bad = [i for i in doomed if not (isinstance(i, int) and 0 <= i < len(self.ops))]
        if bad:
            raise ProgramError(f"block {self.idx}: no op at index {bad[0]} (block has {len(self.ops)} ops)")
        if not doomed:
            return []
        removed = [op for i, op in enumerate(self.ops) if i in doomed]
        self.ops[:] = [op for i, op in enumerate(self.ops) if i not in doomed]
        return removed

    def set_attr(self, op: Operator, name: str, value: Any) -> None:
        """Set attr ``name`` of ``op`` (an op of this block), checked and coerced as at build time.

        Shape inference does not run again: an attr that changes the output
        types needs a new op (``remove_op`` + ``insert_op``); ``verify`` finds
        a mismatch.
        """
        where = self._place(op)
        known = lookup_schema(where, op.type).attrs
        if name not in known:
            raise OpError(f"{where}: unknown attr '{name}' (valid: {', '.join(known) or 'none'})")
        op.attrs[name] = coerce_attr(where, name, known[name].kind, value)

    def rename_inputs(self, op: Operator, mapping: Mapping[str, str]) -> bool:
        """Make ``op`` (an op of this block) read ``mapping[n]`` wherever it reads ``n``; whether anything changed.

        The new names need not be declared yet (a pass may declare them
        next); ``verify`` checks the finished program. Only the names ``op``
        reads are looked up, so renaming every op of a block with one large
        mapping is linear in the block's size.
        """
        where = self._place(op)
        changed = {slot: [mapping.get(n, n) for n in names] for slot, names in op.inputs.items()
                   if any(n in mapping for n in names)}
        bad = [n for names in changed.values() for n in names if not isinstance(n, str) or not n]
        if bad:
            raise OpError(f"{where}: cannot rename an input to {bad[0]!r} (a var name is a non-empty string)")
        if changed:
            op.inputs.update(changed)
        return bool(changed)

    def _place(self, op: Operator) -> OpPlace:
        """Where ``op`` is, for messages; a ProgramError if it is not an op of this block."""
        if not isinstance(op, Operator) or op.block is not self:
            raise ProgramError(f"block {self.idx}: {op!r} is not an op of this block")
        return OpPlace(op)

    def remove_var(self, name: str) -> Variable:
        """Remove and return the var ``name`` of this block (ops that still name it fail ``verify``)."""
        if name not in self.vars:
            raise ProgramError(f"block {self.idx}: no var named '{name}' to remove")
        return self.vars.pop(name)

    def all_parameters(self) -> list[Variable]:
        return [v for v in self.vars.values() if v.is_parameter]

    def __repr__(self) -> str:
        return f"Block(idx={self.idx}, parent_idx={self.parent_idx}, {len(self.ops)} ops, {len(self.vars)} vars)"


__all__ = ["Block"]
