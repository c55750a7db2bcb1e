"""A large block compiled as consecutive pieces of at most ``PIECE_OPS`` ops, each its own XLA executable, run one
after the other, so compile time and memory grow with the block's length, not faster.

XLA's compile time grows faster than the program it compiles, and past a few thousand ops it falls off a cliff
(``design_docs/performance.md``, "Compiles that scale": a chain of 3,021 ops took 12 s and 837 MiB, 4,021 did not
finish in 290 s and passed 6 GB). TensorFlow's XLA clustering cuts its graphs into clusters for the same reason;
here a block of more than ``PIECE_OPS`` run ops is cut in block order. What crosses a cut is every value a later
piece reads or the run fetches or commits: it leaves one executable as an output and enters the next as an
input (an array of the device, no copy to the host). The cost is the fusion XLA cannot do across a cut and one
call per piece: small next to a step of thousands of ops.

A block with control flow (ops with sub-blocks) is compiled whole: a loop's History must stay with the
gradient loop that reads it, and such blocks are not the long ones.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from gradgen.program.ops import OP_SCHEMAS

from .compile import CompiledBlock

__all__ = ["MAX_FUSED_CHAIN", "MAX_WHOLE_OPS", "PIECE_OPS", "PiecewiseBlock", "compiled_block", "cuts", "declines",
           "longest_fused_chain"]

PIECE_OPS = 400
"""The most ops one executable holds: each compile stays near a second on a 2-core machine, and no fused chain
reaches ``MAX_FUSED_CHAIN``."""

MAX_FUSED_CHAIN = 500
"""The longest chain of elementwise ops (each reading the last) a block compiled whole may hold. XLA fuses such a
chain into one loop, and LLVM's instruction scheduler takes time superlinear in that loop's length (measured in
plain JAX as in gradgen: ``design_docs/backends.md``, *Long blocks compile in pieces*)."""

MAX_WHOLE_OPS = 2500
"""Ops (all blocks) above which a block that must compile whole (it has control flow) is declined by
``backend="auto"``: its compile's time and memory grow faster than the program."""


def _has_sub_block(op) -> bool:
    schema = OP_SCHEMAS.get(op.type)
    return schema is not None and any(a.kind == "block" for a in schema.attrs.values())


def cuts(block, skipped: frozenset[int], piece_ops: int | None = None) -> list[list[int]]:
    """The run ops of ``block`` (those not ``skipped``) in pieces of at most ``piece_ops`` (``PIECE_OPS``), in
    block order; one piece when they are no more, or when an op has a sub-block."""
    piece_ops = piece_ops or PIECE_OPS
    run = [i for i in range(len(block.ops)) if i not in skipped]
    if len(run) <= piece_ops or any(_has_sub_block(block.ops[i]) for i in run):
        return [run]
    return [run[k:k + piece_ops] for k in range(0, len(run), piece_ops)]


@dataclass
class _Sizes:
    """What the runner reads of an executable's trace: the sizes of every op output (``failures.run_failed``)."""

    sizes: list = field(default_factory=list)


@dataclass
class _Executables:
    """One executable per piece for one set of run-time shapes: what ``CompiledBlock.executable`` returns."""

    parts: list
    ctx: _Sizes
    text: str | None
    donates: bool = False
    """Pieces never lend the scope's arrays: a later piece may still fail after an earlier one ran."""


class PiecewiseBlock:
    """``block`` compiled as consecutive pieces (``cuts``), with ``CompiledBlock``'s interface: the runner calls
    it as it calls one compiled block."""

    def __init__(self, block, feeds: Sequence[str], from_scope: Sequence[str], fetches: Sequence[str],
                 commits: Sequence[str], device, skipped: frozenset[int], pieces: list[list[int]]):
        self.block, self.device = block, device
        self.feeds, self.from_scope = tuple(feeds), tuple(from_scope)
        self.fetches, self.commits = tuple(fetches), tuple(commits)
        wanted_at_end = set(self.fetches) | set(self.commits)
        later: set[str] = set()  # read by a later piece
        outputs = []
        for piece in reversed(pieces):
            written = {n for i in piece for n in block.ops[i].output_arg_names}
            outputs.append(tuple(sorted(written & (later | wanted_at_end))))
            later |= {n for i in piece for n in block.ops[i].input_arg_names}
        outputs.reverse()
        self._pieces = []
        self._spans = [(piece[0], piece[-1]) for piece in pieces]
        every = frozenset(range(len(block.ops)))
        for piece, outs in zip(pieces, outputs):
            inputs = tuple(_read_before_written(block, piece))
            self._pieces.append(CompiledBlock(block, inputs, (), outs, (), device,
                                              skipped | (every - frozenset(piece))))

    @property
    def compiles(self) -> int:
        return sum(p.compiles for p in self._pieces)

    @property
    def compile_seconds(self) -> float:
        return sum(p.compile_seconds for p in self._pieces)

    @property
    def compile_seconds_per_shape(self) -> float:
        """The mean compile of the whole block (every piece) for one set of shapes so far: each shape compiles
        the first piece once."""
        return self.compile_seconds / max(self._pieces[0].compiles, 1)

    @property
    def draws_at_random(self) -> bool:
        return any(p.draws_at_random for p in self._pieces)

    def executable(self, feed_values: Sequence[Any], scope_values: Sequence[Any], keep_text: bool = False,
                   compile_new: bool = True) -> _Executables | None:
        """Every piece's executable for these shapes: the first piece's from the run's arrays, each next one's
        from the shapes the pieces before it make; None for shapes new to the first piece when not
        ``compile_new``."""
        env = dict(zip(self.feeds, feed_values))
        env.update(zip(self.from_scope, scope_values))
        parts, sizes, texts = [], [], []
        for at, piece in enumerate(self._pieces):
            exe = piece.executable([env[n] for n in piece.feeds], [], keep_text=keep_text,
                                   compile_new=compile_new or at > 0)
            if exe is None:
                return None
            env.update(zip(piece.fetches, exe.compiled.out_info[0]))
            parts.append(exe)
            sizes += exe.ctx.sizes
            if keep_text:
                first, last = self._spans[len(texts)]
                texts.append(f"// piece {len(texts) + 1} of {len(self._pieces)}: ops #{first} to #{last}\n{exe.text}")
        text = "\n".join(texts) if keep_text else None
        return _Executables(parts, _Sizes(sizes), text)

    def __call__(self, feed_values: Sequence[Any], scope_values: Sequence[Any], exe: _Executables | None = None
                 ) -> tuple[list, list]:
        """(fetched values, committed values) of one run: the pieces in order, each fed what the ones before made."""
        exe = exe or self.executable(feed_values, scope_values)
        env = dict(zip(self.feeds, self.on_device(feed_values)))
        env.update(zip(self.from_scope, self.on_device(scope_values)))
        for piece, part in zip(self._pieces, exe.parts):
            made, _ = piece([env[n] for n in piece.feeds], [], part)
            env.update(zip(piece.fetches, made))
        return [env[n] for n in self.fetches], [env[n] for n in self.commits]

    def on_device(self, values: Sequence[Any]) -> list:
        return self._pieces[0].on_device(values)


def _read_before_written(block, piece: list[int]) -> list[str]:
    """The names ops of ``piece`` read before any op of it writes them: what the piece takes in."""
    written: set[str] = set()
    reads: dict[str, None] = {}
    for i in piece:
        op = block.ops[i]
        reads.update((n, None) for n in op.input_arg_names if n not in written)
        written.update(op.output_arg_names)
    return list(reads)


def _elementwise_types() -> frozenset:
    from gradgen.program.ops import activation, elementwise

    return frozenset(activation.COMPUTE) | frozenset(elementwise.COMPUTE)


def longest_fused_chain(block) -> int:
    """The most elementwise ops one after another in ``block`` (each reading an output of the one before)."""
    fusible, depth, longest = _elementwise_types(), {}, 0
    for op in block.ops:
        if op.type not in fusible:
            continue
        here = 1 + max((depth.get(name, 0) for name in op.input_arg_names), default=0)
        for name in op.output_arg_names:
            depth[name] = here
        longest = max(longest, here)
    return longest


def declines(program) -> str | None:
    """Why ``backend="auto"`` should not start a compile of ``program`` it may not finish, or None: only a block
    that compiles whole (``cuts``) can be that long; a compile, once started, cannot be stopped."""
    block = program.global_block()
    if len(cuts(block, frozenset())) > 1:
        return None
    ops = sum(len(b.ops) for b in program.blocks)
    if ops > MAX_WHOLE_OPS:
        return (f"{ops} ops with control flow: such a block compiles whole, and blocks of more than "
                f"{MAX_WHOLE_OPS} ops are not compiled (the compile's time and memory grow faster than the block)")
    chain = longest_fused_chain(block)
    if chain > MAX_FUSED_CHAIN:
        return (f"a chain of {chain} elementwise ops: chains of more than {MAX_FUSED_CHAIN} are not compiled "
                f"(XLA fuses them into one loop whose compile time grows faster than its length)")
    return None


def compiled_block(block, feeds: Sequence[str], from_scope: Sequence[str], fetches: Sequence[str],
                   commits: Sequence[str], device=None, skipped: frozenset[int] = frozenset(),
                   piece_ops: int | None = None):
    """``block`` compiled for one run signature: one ``CompiledBlock``, or a ``PiecewiseBlock`` when it runs more
    than ``piece_ops`` (``PIECE_OPS``) ops."""
    pieces = cuts(block, skipped, piece_ops)
    if len(pieces) == 1:
        return CompiledBlock(block, feeds, from_scope, fetches, commits, device, skipped)
    return PiecewiseBlock(block, feeds, from_scope, fetches, commits, device, skipped, pieces)
