"""Compiling one block into a ``Plan``: kernels built, names resolved, lifetimes decided.

A plan is plain data the executor's hot loop walks without thinking:
one ``Step`` tuple per op, holding the kernel function (already built by its
factory from the op's attrs), the input names, the output name(s) and the
names of the vars that die right after the step. Planning also decides,
before any op runs, which vars a run needs from outside (feeds and
persistable vars from the scope) and fails clearly when one cannot come
from anywhere.
"""
from __future__ import annotations

from operator import itemgetter
from typing import Any, Callable, NamedTuple, Sequence

from program.describe import describe_var, op_location

from .errors import ExecutionError, FeedError
from .kernels import KERNELS


class Step(NamedTuple):
    """What the hot loop needs for one op.

    ``get(env)`` returns the input arrays (the one array when ``nargs`` is 1,
    a tuple when it is more); ``out`` is the output name when there is
    exactly one, else None and ``outs`` names them; ``dead`` are the vars to
    drop right after the step.
    """

    fn: Callable[..., Any]
    get: Callable[[dict], Any] | None
    nargs: int
    out: str | None
    outs: tuple[str, ...]
    dead: tuple[str, ...]
    ins: tuple[str, ...]


class Plan(NamedTuple):
    """A compiled block. ``steps[i]`` runs ``block.ops[i]``."""

    block: Any
    steps: tuple[Step, ...]
    feeds: tuple[str, ...]
    """Feed names the run keeps (fed vars no op reads and nobody fetches are dropped)."""
    from_scope: tuple[str, ...]
    """Persistable vars read before any op writes them: loaded from the scope at run start."""
    commits: tuple[str, ...]
    """Persistable vars some op writes: copied into the scope only when the whole run succeeded."""
    fetches: tuple[str, ...]


def build_kernel(block, index: int, op) -> Callable[..., Any]:
    """The op's kernel function, built by its factory; an ExecutionError if there is none or it refuses."""
    factory = KERNELS.get(op.type)
    where = op_location(block, index, op.type, op.callsite)
    if factory is None:
        raise ExecutionError(f"{where}: no kernel is registered for op type '{op.type}'")
    try:
        return factory(op)
    except Exception as e:  # a factory rejecting attrs: report it where the op is
        raise ExecutionError(f"{where}: cannot build its kernel: {type(e).__name__}: {e}") from e


def _is_persistable(block, name: str) -> bool:
    var = block.find_var(name)
    return var is not None and var.persistable


def _missing_input(block, index: int, op, name: str, feeds: Sequence[str]) -> FeedError:
    where = op_location(block, index, op.type, op.callsite)
    fed = ", ".join(sorted(feeds)) or "nothing"
    return FeedError(f"{where} needs input {describe_var(block, name)}, which is neither fed nor persistable "
                     f"nor made by an earlier op (fed: {fed})")


def build_plan(block, feed_names: Sequence[str], fetch_names: Sequence[str]) -> Plan:
    """Compile ``block`` for a run fed ``feed_names`` and fetching ``fetch_names``.

    Raises FeedError when a feed names no var or an op input cannot come from
    anywhere, and ExecutionError when a fetched var is never available or an
    op type has no kernel.
    """
    for name in feed_names:
        if block.find_var(name) is None:
            raise FeedError(f"block {block.idx}: feed '{name}' names no var of the program")
    fed = set(feed_names)
    produced: set[str] = set()
    needed_from_scope: dict[str, None] = {}
    needed_feeds: dict[str, None] = {}
    last_use: dict[str, int] = {}
    ops = block.ops
    for i, op in enumerate(ops):
        for name in op.input_arg_names:
            if name not in produced:
                if name in fed:
                    needed_feeds[name] = None
                elif _is_persistable(block, name):
                    needed_from_scope[name] = None
                else:
                    raise _missing_input(block, i, op, name, feed_names)
            last_use[name] = i
        for name in op.output_arg_names:
            produced.add(name)
            last_use[name] = i
    for name in fetch_names:
        if block.find_var(name) is None:
            raise ExecutionError(f"block {block.idx}: fetch '{name}' names no var of the program")
        if name in produced:
            continue
        if name in fed:
            needed_feeds[name] = None
        elif _is_persistable(block, name):
            needed_from_scope[name] = None
        else:
            raise ExecutionError(f"block {block.idx}: cannot fetch {describe_var(block, name)}: no op makes it, "
                                 "it is not fed, and it is not persistable")

    keep = set(fetch_names)
    dying: dict[int, list[str]] = {}
    for name, i in last_use.items():
        if name not in keep and not _is_persistable(block, name):
            dying.setdefault(i, []).append(name)

    steps = []
    for i, op in enumerate(ops):
        ins, outs = tuple(op.input_arg_names), tuple(op.output_arg_names)
        steps.append(Step(build_kernel(block, i, op), itemgetter(*ins) if ins else None, len(ins),
                          outs[0] if len(outs) == 1 else None, outs, tuple(dying.get(i, ())), ins))
    commits = tuple(dict.fromkeys(n for op in ops for n in op.output_arg_names if _is_persistable(block, n)))
    return Plan(block, tuple(steps), tuple(needed_feeds), tuple(needed_from_scope), commits, tuple(fetch_names))
