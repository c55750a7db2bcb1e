"""What a run of a block reads and writes, worked out before anything runs (every backend's plan starts here):
the ops it runs, the feeds it keeps, the persistable vars it reads from the scope, what it fetches and what it
commits.

A run of block 0 runs the ops its fetches and the program's persistable updates need, and no more
(``unneeded_ops``), as TF1's ``Session.run`` does: an evaluation clone of a training program runs with only
its inputs fed, without the labels its loss would read. A run reads a var from outside when a run op reads it
before any op makes it: a feed if it is fed, else the scope's value if it is persistable, else the run cannot
happen and ``sources`` says which op needs what.

Feeding a var that an op makes overrides it, as in TF1 (``fed_overrides``): the op that makes it does not run
for it, and every op after reads the fed value. Where that is ambiguous the feed is refused with a FeedError
naming the var and the ops: a var several ops write, a persistable an op writes before any op reads it, a var
an op inside a sub-block writes, an op some of whose other outputs the run still needs, an op that waits for
other ranks. A fed var that an op reads before any op writes it (a persistable an optimizer updates, say) is
the value the run starts from, and the ops that write it run as usual.
"""
from __future__ import annotations

from typing import AbstractSet, Mapping, NamedTuple, Sequence

from gradgen.program.describe import describe_var, op_location

from ...errors import ExecutionError, FeedError

__all__ = ["ALWAYS_RUN", "RunSignature", "fed_overrides", "is_persistable", "run_signature", "skipped_ops",
           "sources", "unneeded_ops"]

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


def _where(block, index: int) -> str:
    op = block.ops[index]
    return op_location(block, index, op.type, op.callsite)


def _written_inside(block, name: str) -> str | None:
    """Where an op of a sub-block of ``block``'s program writes block var ``name``, or None."""
    var = block.find_var(name)
    for sub in block.program.blocks:
        if sub is block or sub.find_var(name) is not var:
            continue
        for j, op in enumerate(sub.ops):
            if name in op.output_arg_names:
                return _where(sub, j)
    return None


def fed_overrides(block, feed_names: Sequence[str]) -> dict[int, frozenset[str]]:
    """The ops of ``block`` whose output a feed overrides (op index -> the fed names it makes): a fed var that an
    op makes before any op reads it is the feed's, and that op does not run for it (TF1's ``Session.run``).

    Refused with a FeedError naming the var and the ops where overriding would be ambiguous: several ops write
    the var, it is persistable (a fed persistable is the value the run starts from, and this one is made before
    anything reads it), an op of a sub-block writes it, or the op waits for other ranks. A var some op reads
    before any op writes it is no override: the feed is its starting value (``sources``).
    """
    if not feed_names:
        return {}
    fed = set(feed_names)
    writers: dict[str, list[int]] = {}
    read_first: set[str] = set()
    for i, op in enumerate(block.ops):
        read_first.update(n for n in op.input_arg_names if n in fed and n not in writers)
        for n in op.output_arg_names:
            if n in fed:
                writers.setdefault(n, []).append(i)
    overrides: dict[int, set[str]] = {}
    for name in feed_names:
        inside = _written_inside(block, name)
        if inside is not None:
            raise FeedError(f"feed '{name}': {inside} writes it inside a sub-block, so a feed cannot say which "
                            "value it replaces; feed a var of block 0 that no sub-block writes")
        if name not in writers or name in read_first:
            continue
        at = writers[name]
        if len(at) > 1:
            raise FeedError(f"feed '{name}': {len(at)} ops write it ({'; '.join(_where(block, i) for i in at)}), so "
                            "a feed cannot say which value it replaces; feed a var one op makes")
        if is_persistable(block, name):
            raise FeedError(f"feed '{name}': persistable {describe_var(block, name)} is made by {_where(block, at[0])} "
                            "before any op reads it, so the feed, the value the run starts from, would never be "
                            "read; to change the scope's value, scope.set it")
        if block.ops[at[0]].type in ALWAYS_RUN:
            raise FeedError(f"feed '{name}': {_where(block, at[0])} makes it and waits for the other ranks, so it "
                            "cannot be left out")
        overrides.setdefault(at[0], set()).add(name)
    return {i: frozenset(names) for i, names in overrides.items()}


def unneeded_ops(block, fetch_names: Sequence[str],
                 overrides: Mapping[int, AbstractSet[str]] | None = None) -> frozenset[int]:
    """The ops of ``block`` a run fetching ``fetch_names`` need not run: those that make nothing the fetches, a
    persistable var (an update the run commits) or a later needed op reads, and wait for no other rank; and
    the ops whose outputs feeds override (``fed_overrides``), or the FeedError saying the run still needs
    another output of such an op."""
    overrides = overrides or {}
    need = set(fetch_names)
    skipped = set()
    for i in range(len(block.ops) - 1, -1, -1):
        op = block.ops[i]
        outs = op.output_arg_names
        if i in overrides:
            others = [n for n in outs if n not in overrides[i] and (n in need or is_persistable(block, n))]
            if others:
                fed = ", ".join(f"'{n}'" for n in sorted(overrides[i]))
                raise FeedError(f"feed {fed} overrides an output of {_where(block, i)}, but the run also needs its "
                                f"output{'s' if len(others) > 1 else ''} {', '.join(others)}, which only that op "
                                "makes: feed those too, or fetch only what the fed value decides")
            skipped.add(i)
        elif (op.type in ALWAYS_RUN or not outs or not need.isdisjoint(outs)
                or any(is_persistable(block, n) for n in outs)):
            need.update(op.input_arg_names)
        else:
            skipped.add(i)
    return frozenset(skipped)


def skipped_ops(block, feed_names: Sequence[str], fetch_names: Sequence[str]) -> frozenset[int]:
    """The ops of block 0 a run fed ``feed_names`` and fetching ``fetch_names`` leaves out: every backend's."""
    return unneeded_ops(block, fetch_names, fed_overrides(block, feed_names))


def commits(block) -> tuple[str, ...]:
    """The persistable vars block's ops write: what a successful run commits to the scope."""
    return tuple(dict.fromkeys(n for op in block.ops for n in op.output_arg_names if is_persistable(block, n)))


def run_signature(block, feed_names: Sequence[str], fetch_names: Sequence[str]) -> RunSignature:
    """The names of a run of ``block`` fed ``feed_names`` and fetching ``fetch_names`` (leaving out the ops
    nothing it fetches or commits needs), or the FeedError or ExecutionError saying what cannot come from
    anywhere."""
    skipped = skipped_ops(block, feed_names, fetch_names)
    feeds, from_scope = sources(block, feed_names, fetch_names, skipped)
    return RunSignature(tuple(feeds), tuple(from_scope), tuple(fetch_names), commits(block), skipped)
