"""The lowered program as text: what ``gradgen show PROGRAM --backend xla`` prints.

StableHLO with its debug locations: every instruction carries the name scope of the gradgen op it came from
(``b<block>/op<index>:<type>``, ``trace.scope_name``), so a reader can go from the compiled program back to the
op (and, through ``program/provenance.py``, from a grad op to its forward op). A -1 dim is shown as ``batch``.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..shared.signature import run_signature
from .pieces import compiled_block

__all__ = ["lowered_text"]


def _example(var, batch: int) -> np.ndarray:
    return np.zeros([batch if d == -1 else d for d in var.shape], dtype=var.dtype)


def lowered_text(program, feed_names: Sequence[str], fetch_names: Sequence[str], batch: int = 1) -> str:
    """The StableHLO text of block 0 of ``program`` for a run fed ``feed_names`` and fetching ``fetch_names``,
    with every -1 dim taken as ``batch``; a block compiled in pieces shows each piece's module in turn."""
    block = program.global_block()
    sig = run_signature(block, feed_names, fetch_names)
    compiled = compiled_block(block, sig.feeds, sig.from_scope, sig.fetches, sig.commits, skipped=sig.skipped)
    feeds = [_example(block.var(n), batch) for n in sig.feeds]
    scope = [_example(block.var(n), batch) for n in sig.from_scope]
    return compiled.executable(feeds, scope, keep_text=True).text
