"""``Block``: an ordered list of ops and the vars they use; sub-blocks have a parent."""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Iterable

from .callsite import user_callsite
from .dtypes import normalize_dtype
from .errors import ProgramError
from .operator import Operator
from .validate import make_operator
from .variable import Variable

if TYPE_CHECKING:
    from .program import Program


class Block:
    """Ops in execution order and vars by name.

    ``var(name)`` also looks in ancestor blocks, so an op in a sub-block can
    read a var of the block that owns it. Every mutation goes through the
    methods here, which validate ops against their schemas and bump the
    program's version (the executor's plans depend on it).
    """

    def __init__(self, program: "Program", idx: int, parent_idx: int = -1):
        self.program = program
        self.idx = idx
        self.parent_idx = parent_idx
        self.ops: list[Operator] = []
        self.vars: dict[str, Variable] = {}

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
            raise ProgramError(f"block {self.idx}: var '{name}' has an invalid shape {shape!r} (a list of ints)") from None
        if shape and min(shape) < -1:
            raise ProgramError(f"block {self.idx}: var '{name}' has an invalid shape {list(shape)} (dims are >= 0 or -1)")
        var = Variable(self, name, shape, normalize_dtype(dtype), persistable, stop_gradient, is_parameter, trainable)
        self.vars[name] = var
        self.program._touch()
        return var

    def append_op(self, type: str, inputs=None, outputs=None, attrs=None, *, role: str = "forward",
                  forward_op: Operator | None = None, callsite: str | None = None) -> Operator:
        """Validate an op against its schema, create its missing output vars, append it."""
        if callsite is None:
            callsite = user_callsite()
        op = make_operator(self, len(self.ops), type, inputs, outputs, attrs, role, forward_op, callsite)
        self.ops.append(op)
        self.program._touch()
        return op

    def insert_op(self, index: int, type: str, inputs=None, outputs=None, attrs=None, *, role: str = "forward",
                  forward_op: Operator | None = None, callsite: str | None = None) -> Operator:
        """Like ``append_op`` but at position ``index``."""
        if not 0 <= index <= len(self.ops):
            raise ProgramError(f"block {self.idx}: cannot insert an op at index {index} (block has {len(self.ops)} ops)")
        if callsite is None:
            callsite = user_callsite()
        op = make_operator(self, index, type, inputs, outputs, attrs, role, forward_op, callsite)
        if index == len(self.ops):
            self.ops.append(op)
        else:
            self.ops.insert(index, op)
        self.program._touch()
        return op

    def remove_op(self, index: int) -> Operator:
        """Remove and return the op at ``index`` (its vars stay declared)."""
        if not 0 <= index < len(self.ops):
            raise ProgramError(f"block {self.idx}: no op at index {index} (block has {len(self.ops)} ops)")
        op = self.ops.pop(index)
        self.program._touch()
        return op

    def remove_var(self, name: str) -> Variable:
        if name not in self.vars:
            raise ProgramError(f"block {self.idx}: no var named '{name}' to remove")
        self.program._touch()
        return self.vars.pop(name)

    def all_parameters(self) -> list[Variable]:
        return [v for v in self.vars.values() if v.is_parameter]

    def __repr__(self) -> str:
        return f"Block(idx={self.idx}, parent_idx={self.parent_idx}, {len(self.ops)} ops, {len(self.vars)} vars)"
