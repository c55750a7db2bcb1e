"""``Program``: a list of blocks; block 0 is the global block."""
from __future__ import annotations

import os
import weakref
from typing import Iterable, Iterator

from .block import Block
from .dot import program_to_dot
from .errors import ProgramError, SerializationError
from .nesting import block_depth, make_room_for
from .passes import strip_for_test
from .printer import program_to_text
from .serialize import program_from_dict, program_from_json, program_to_dict, program_to_json, write_atomically
from .subblocks import block_attrs, owned_blocks
from .tracked import tracked_list


class Program:
    """A whole computation: block 0 plus sub-blocks owned by control-flow ops.

    ``version`` grows with every change: ``blocks``, a block's ``ops`` and
    ``vars``, an op's fields are tracked containers (``program/tracked.py``)
    and var flags are properties; the executor uses it to know when a cached
    plan is stale.
    Printing, files and ``clone`` are thin calls to ``printer``, ``dot``,
    ``serialize`` and ``passes``, which work on programs without importing
    this module, so the dependency runs one way.
    """

    def __init__(self):
        self.version = 0
        self.blocks: list[Block] = tracked_list([Block(self, 0, -1)], self)
        self.random_seed = 0
        self._current_block_idx = 0
        self._name_counters: dict[str, int] = {}
        self._seed_counter = 0
        self._cloned_from: weakref.ref | None = None

    def _touch(self) -> None:
        self.version += 1

    # -- blocks -------------------------------------------------------------
    def global_block(self) -> Block:
        return self.blocks[0]

    def block(self, i: int) -> Block:
        if not isinstance(i, int) or not 0 <= i < len(self.blocks):
            raise ProgramError(f"program has no block {i} (it has {len(self.blocks)})")
        return self.blocks[i]

    def current_block(self) -> Block:
        """Where ``layers`` functions append ops (block 0 unless a control-flow builder entered a sub-block)."""
        return self.blocks[self._current_block_idx]

    def create_block(self, parent_idx: int | None = None) -> Block:
        """A new empty block whose parent is ``parent_idx`` (default: the current block)."""
        parent = self._current_block_idx if parent_idx is None else parent_idx
        self.block(parent)
        make_room_for(block_depth(self, parent) + 1, f"block {len(self.blocks)}")
        block = Block(self, len(self.blocks), parent)
        self.blocks.append(block)
        return block

    def remove_blocks(self, indices: Iterable[int]) -> None:
        """Drop blocks ``indices`` and every block their ops own; renumber the rest and the ops' block attrs.

        A ProgramError if a block that stays is the child of, or owned by an op
        that stays while its block goes; block 0 cannot go.
        """
        doomed = set(indices)
        for i in doomed:
            if not isinstance(i, int) or not 1 <= i < len(self.blocks):
                raise ProgramError(f"cannot remove block {i!r}: block 0 stays, and the program has blocks "
                                   f"0-{len(self.blocks) - 1}")
        stack = list(doomed)
        while stack:
            for op in self.blocks[stack.pop()].ops:
                for b in owned_blocks(op):
                    if b not in doomed:
                        doomed.add(b)
                        stack.append(b)
        if not doomed:
            return
        survivors = [b for b in self.blocks if b.idx not in doomed]
        new_index = {b.idx: i for i, b in enumerate(survivors)}
        for block in survivors:
            if block.parent_idx >= 0 and block.parent_idx not in new_index:
                raise ProgramError(f"cannot remove block {block.parent_idx}: block {block.idx} stays and is its child")
            for op in block.ops:
                for name in block_attrs(op):
                    if op.attrs[name] not in new_index:
                        raise ProgramError(f"cannot remove block {op.attrs[name]}: an op of block {block.idx} "
                                           f"({op.type}) stays and owns it")
        for block in survivors:
            block.idx = new_index[block.idx]
            block.parent_idx = new_index[block.parent_idx] if block.parent_idx >= 0 else -1
            for op in block.ops:
                for name in block_attrs(op):
                    op.attrs[name] = new_index[op.attrs[name]]
        self.blocks[:] = survivors
        self._current_block_idx = new_index.get(self._current_block_idx, 0)

    # -- names --------------------------------------------------------------
    def has_var_anywhere(self, name: str) -> bool:
        for b in self.blocks:  # a plain loop: the backward pass asks this for every name it hands out
            if name in b.vars:
                return True
        return False

    def unique_name(self, prefix: str) -> str:
        """``prefix_k`` for the smallest counter k not yet used by this program for ``prefix``."""
        k = self._name_counters.get(prefix, 0)
        while True:
            name = f"{prefix}_{k}"
            k += 1
            if not self.has_var_anywhere(name):
                self._name_counters[prefix] = k
                return name

    def next_seed(self) -> int:
        """A deterministic seed for the next random initializer of this program."""
        seed = self.random_seed * 1_000_003 + self._seed_counter
        self._seed_counter += 1
        return seed

    # -- whole-program views --------------------------------------------------
    def all_parameters(self) -> list:
        return [v for b in self.blocks for v in b.vars.values() if v.is_parameter]

    def list_vars(self) -> Iterator:
        for b in self.blocks:
            yield from b.vars.values()

    def clone(self, for_test: bool = False) -> "Program":
        """A deep copy. With ``for_test``, only forward ops are kept (no backward or optimizer ops)."""
        copy = program_from_dict(program_to_dict(self), "<clone>", into=type(self)())
        copy.random_seed = self.random_seed
        copy._cloned_from = weakref.ref(self)
        if for_test:
            strip_for_test(copy)
        return copy

    def descends_from(self, other: "Program") -> bool:
        """True when this program is ``other`` or was made from it by ``clone`` (directly or through clones).

        A Variable of ``other`` may then stand for the var of the same name here, as in Paddle's
        ``exe.run(main.clone(for_test=True), fetch_list=[loss])``.
        """
        program: Program | None = self
        while program is not None:
            if program is other:
                return True
            program = program._cloned_from() if program._cloned_from is not None else None
        return False

    # -- files and text: thin calls to the modules below this one ---------------
    def to_json(self) -> str:
        """Versioned, deterministic JSON text: the same program always gives the same bytes."""
        return program_to_json(self)

    @classmethod
    def from_json(cls, text: str) -> "Program":
        return program_from_json(text, into=cls())

    def save(self, path: str | os.PathLike) -> None:
        """Write ``to_json()`` to ``path`` atomically (a temp file renamed into place)."""
        write_atomically(path, self.to_json().encode("utf-8"))

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Program":
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise SerializationError(f"cannot read program file {os.fspath(path)!r}: {e.strerror}") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise SerializationError(f"{os.fspath(path)!r} is not a gradgen program file (not UTF-8 text)") from None
        return program_from_json(text, source=os.fspath(path), into=cls())

    def to_dot(self, block: int = 0, rankdir: str = "TB") -> str:
        return program_to_dot(self, block, rankdir)

    def explain(self, feed_shapes: dict | None = None) -> str:
        """A self-contained HTML page linking every grad op to its forward op and to memory (see explain.md)."""
        from .display import explain_page

        return explain_page(self, feed_shapes=feed_shapes)

    def _repr_html_(self) -> str | None:
        from .display import notebook_html

        return notebook_html(self)

    def __str__(self) -> str:
        return program_to_text(self)

    def __repr__(self) -> str:
        ops = sum(len(b.ops) for b in self.blocks)
        return f"<Program: {len(self.blocks)} block(s), {ops} op(s), version {self.version}>"


__all__ = ["Program"]
