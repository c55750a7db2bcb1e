"""What a run of a block reads and writes, worked out before anything runs (every backend's plan starts here):
the ops it runs, the feeds it keeps, the persistable vars it reads from the scope, what it fetches and what it
commits.

A run of block 0 runs the ops its fetches and the program's persistable updates need, and no more
(``unneeded_ops``), as TF1's ``Session.run`` does: an evaluation clone of a training program runs with only
its inputs fed, without the labels its loss would read. A run reads a var from outside when a run op reads it
before any op makes it: a feed if it is fed, else the scope's value if it is persistable, else the run cannot
happen and ``sources`` says which op needs what.
"""
from __future__ import annotations

from typing import AbstractSet, NamedTuple, Sequence

from gradgen.program.describe import describe_var, op_location

from ...errors import ExecutionError, FeedError

__all__ = ["ALWAYS_RUN", "RunSignature", "is_persistable", "run_signature", "sources", "unneeded_ops"]

ALWAYS_RUN = frozenset({"allreduce_start", "allreduce_wait", "broadcast"})
"""Op types a run never leaves out: they wait for the other ranks of a data-parallel job, which run them too."""


class RunSignature(NamedTuple):
    """A run's names: kept feeds, persistable vars read from the scope, fetches, persistable vars written, and
    the ops it leaves out (indices of block 0)."""

    feeds: tuple[str, ...]
    from_scope: tuple[str, ...]
    fetches: tuple[str, ...]
    commits: tuple[str, ...]
    skipped: frozenset[int] = frozenset()


def is_persistable(block, name: str) -> bool:
    var = block.find_var(name)
    return var is not None and var.persistable


def missing_input(block, index: int, op, name: str, feeds: Sequence[str]) -> FeedError:
    where = op_location(block, index, op.type, op.callsite)
    fed = ", ".join(sorted(feeds)) or "nothing"
    return FeedError(f"{where} needs input {describe_var(block, name)}, which is neither fed nor persistable "
                     f"nor made by an earlier op (fed: {fed})")


def sources(block, feed_names: Sequence[str], fetch_names: Sequence[str],
            skip: AbstractSet[int] = frozenset()) -> tuple[list[str], list[str]]:
    """(the feeds a run keeps, the persistable vars it reads from the scope), or the error saying what is missing;
    the ops at ``skip`` do not run (what they would make is fed)."""
    for name in feed_names:
        if block.find_var(name) is None:
            raise FeedError(f"block {block.idx}: feed '{name}' names no var of the program")
    fed = set(feed_names)
    produced: set[str] = set()
    from_scope: dict[str, None] = {}
    feeds: dict[str, None] = {}
    for i, op in enumerate(block.ops):
        if i in skip:
            continue
        for name in op.input_arg_names:
            if name not in produced:
                if name in fed:
                    feeds[name] = None
                elif is_persistable(block, name):
                    from_scope[name] = None
                else:
                    raise missing_input(block, i, op, name, feed_names)
        produced.update(op.output_arg_names)
    for name in fetch_names:
        if block.find_var(name) is None:
            raise ExecutionError(f"block {block.idx}: fetch '{name}' names no var of the program")
        if name in produced:
            continue
        if name in fed:
            feeds[name] = None
        elif is_persistable(block, name):
            from_scope[name] = None
        else:
            raise ExecutionError(f"block {block.idx}: cannot fetch {describe_var(block, name)}: no op makes it, "
                                 "it is not fed, and it is not persistable")
    return list(feeds), list(from_scope)


def unneeded_ops(block, fetch_names: Sequence[str]) -> frozenset[int]:
    """The ops of ``block`` a run fetching ``fetch_names`` need not run: those that make nothing the fetches, a
    persistable var (an update the run commits) or a later needed op reads, and wait for no other rank."""
    need = set(fetch_names)
    skipped = set()
    for i in range(len(block.ops) - 1, -1, -1):
        op = block.ops[i]
        outs = op.output_arg_names
        if (op.type in ALWAYS_RUN or not outs or not need.isdisjoint(outs)
                or any(is_persistable(block, n) for n in outs)):
            need.update(op.input_arg_names)
        else:
            skipped.add(i)
    return frozenset(skipped)


def commits(block) -> tuple[str, ...]:
    """The persistable vars block's ops write: what a successful run commits to the scope."""
    return tuple(dict.fromkeys(n for op in block.ops for n in op.output_arg_names if is_persistable(block, n)))


def run_signature(block, feed_names: Sequence[str], fetch_names: Sequence[str]) -> RunSignature:
    """The names of a run of ``block`` fed ``feed_names`` and fetching ``fetch_names`` (leaving out the ops
    nothing it fetches or commits needs), or the FeedError or ExecutionError saying what cannot come from
    anywhere."""
    skipped = unneeded_ops(block, fetch_names)
    feeds, from_scope = sources(block, feed_names, fetch_names, skipped)
    return RunSignature(tuple(feeds), tuple(from_scope), tuple(fetch_names), commits(block), skipped)
