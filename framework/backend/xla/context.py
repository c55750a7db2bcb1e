"""What a lowering sees while a block is traced: the checks it can ask for and the sub-blocks it can trace.

A lowering is ``LOWERINGS[op.type](op, ctx) -> fn``, the numpy kernels' convention (``backend/numpy/kernels/
signature.py``) with a context: ``fn`` takes the op's input values, flat in schema slot order, as jax arrays,
and returns its output (or a tuple of them, flat in slot order). The factory runs once per trace, so work that
depends only on attrs and static shapes happens there.

What numpy raises at run time (an id out of range, a loop past ``max_iterations``) XLA would clamp or ignore:
a lowering states the condition with ``ctx.check(ok, message)``; the compiled step returns every check's
flag, and the executor raises the first failed one's message, naming the op, before anything is committed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

__all__ = ["Check", "TraceContext"]


@dataclass
class Check:
    """A condition a run must meet: ``where`` names the op, ``message`` says what went wrong."""

    where: str
    message: str


@dataclass
class TraceContext:
    """Shared by every op of one trace (sub-blocks included)."""

    history_capacity: int
    """Rows a ``while`` with no ``max_iterations`` keeps for its History (the run retries with more rows when a
    loop runs longer: ``overflow``)."""
    trace_block: Callable[..., list] = field(repr=False, default=None)
    """``trace_block(block, env, fetches) -> values``: trace a sub-block (set by ``trace``)."""
    checks: list[Check] = field(default_factory=list)
    flags: list[Any] = field(default_factory=list)
    """One traced bool per check: True when the run met it."""
    overflow: list[Any] = field(default_factory=list)
    """Traced bools: True when a loop ran past ``history_capacity`` rows while its ``max_iterations`` (if any)
    allows more (the step is run again with more rows)."""
    steps_of: dict[str, Any] = field(default_factory=dict)
    """History var name -> the traced trip count of its loop (a fetched History is sliced to it on the host)."""
    where: str = ""
    """The op being traced, as errors name it (set by ``trace``)."""
    precomputed: frozenset = frozenset()
    """Indexes of block-0 ops the trace skips: those whose outputs the step receives as inputs, computed on the
    host (``compile``'s ``HOST_COMPUTED``), and those the run leaves out (``shared/signature.unneeded_ops``)."""
    host_state: dict = field(default_factory=dict)
    """State a lowering keeps on the host across the traces of one compiled block (a dropout's random stream:
    one per block, whatever the run-time shapes, as the numpy backend keeps one per plan)."""

    sizes: list = field(default_factory=list)
    """(where, var, shape, dtype, bytes) of every op output traced: an allocation the compiled run cannot make
    names the op whose output it was (``failures.run_failed``)."""

    kept_steps: dict = field(default_factory=dict)
    """A fused recurrence's values of every step, kept by its forward op for its gradient, and the traced inputs
    they were computed from, by (op type, input names): the gradient op in the same trace, reading the very same
    values, backpropagates through them instead of running the forward again."""

    def check(self, ok, message: str) -> None:
        """Fail the run with ``message`` (naming the op being traced) unless traced bool ``ok`` is True."""
        self.checks.append(Check(self.where, message))
        self.flags.append(ok)

    def sub_block(self, op, key_attr: str) -> Any:
        """The Block that attr ``key_attr`` (``true_block``, ``body_block``...) of ``op`` names."""
        return op.block.program.block(op.attr(key_attr))

    def trace_inline(self, block, env: dict, fetches: Sequence[str]) -> list:
        """Trace ``block`` in place (not inside a ``lax`` body): its checks join this context directly, and the
        op being traced is named again afterwards."""
        where = self.where
        try:
            return self.trace_block(block, env, fetches)
        finally:
            self.where = where
