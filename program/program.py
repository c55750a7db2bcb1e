"""``Program``: a list of blocks; block 0 is the global block."""
from __future__ import annotations

import os
from typing import Iterator

from .block import Block
from .errors import ProgramError


class Program:
    """A whole computation: block 0 plus sub-blocks owned by control-flow ops.

    ``version`` grows with every change made through the Block methods; the
    executor uses it to know when a cached plan is stale.
    """

    def __init__(self):
        self.blocks: list[Block] = [Block(self, 0, -1)]
        self.version = 0
        self.random_seed = 0
        self._current_block_idx = 0
        self._name_counters: dict[str, int] = {}
        self._seed_counter = 0

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
        block = Block(self, len(self.blocks), parent)
        self.blocks.append(block)
        self._touch()
        return block

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
        from .serialize import program_from_dict, program_to_dict

        copy = program_from_dict(program_to_dict(self))
        copy.random_seed = self.random_seed
        if for_test:
            from .passes import strip_for_test

            strip_for_test(copy)
        return copy

    # -- files ----------------------------------------------------------------
    def to_json(self) -> str:
        """Versioned, deterministic JSON text: the same program always gives the same bytes."""
        from .serialize import program_to_json

        return program_to_json(self)

    @staticmethod
    def from_json(text: str) -> "Program":
        from .serialize import program_from_json

        return program_from_json(text)

    def save(self, path: str | os.PathLike) -> None:
        """Write ``to_json()`` to ``path`` atomically (a temp file renamed into place)."""
        from .serialize import write_atomically

        write_atomically(path, self.to_json().encode("utf-8"))

    @staticmethod
    def load(path: str | os.PathLike) -> "Program":
        from .serialize import SerializationError, program_from_json

        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise SerializationError(f"cannot read program file {os.fspath(path)!r}: {e.strerror}") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise SerializationError(f"{os.fspath(path)!r} is not a gradgen program file (not UTF-8 text)") from None
        return program_from_json(text, source=os.fspath(path))

    def to_dot(self, block: int = 0) -> str:
        from .dot import program_to_dot

        return program_to_dot(self, block)

    def explain(self, feed_shapes: dict | None = None) -> str:
        """A self-contained HTML page linking every grad op to its forward op and to memory (see explain.md)."""
        from .display import explain_page

        return explain_page(self, feed_shapes=feed_shapes)

    def _repr_html_(self) -> str | None:
        from .display import notebook_html

        return notebook_html(self)

    def __str__(self) -> str:
        from .printer import program_to_text

        return program_to_text(self)

    def __repr__(self) -> str:
        ops = sum(len(b.ops) for b in self.blocks)
        return f"<Program: {len(self.blocks)} block(s), {ops} op(s), version {self.version}>"
