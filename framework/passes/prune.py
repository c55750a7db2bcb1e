"""Pruning: keep only the ops some fetched vars depend on.

An inference model is its training program pruned to the prediction: the
backward and optimizer ops, the loss and the label feeds all fall away
because the prediction does not depend on them. ``gradgen run`` prunes the
same way when nothing but the fetched values can be observed, so a run that
fetches the prediction does not demand the labels.

The walk goes backwards over block 0 from the fetched names: an op is
needed when it writes a needed name; its inputs then become needed. A fed
name cuts the walk (its value comes from the feed). Sub-blocks need no walk
of their own: a control-flow op lists what its sub-blocks read in its own
inputs, so keeping or dropping the op keeps or drops its blocks.

>>> infer = prune(main, ["y_predict"], feeds=["x"], for_test=True)
>>> required_inputs(infer.global_block())
(['x'], ['fc_0.w_0', 'fc_0.b_0'])
"""
from __future__ import annotations

from typing import Iterable, Sequence

from gradgen.program import OP_SCHEMAS, Program
from gradgen.program.describe import describe_var, op_location
from gradgen.program.errors import ProgramError
from gradgen.program.subblocks import owned_blocks
from gradgen.program.variable import Variable, var_names


class PruneError(ProgramError):
    """The fetches cannot be computed from the feeds, or name no var, or need training ops in an inference program."""


def needed_ops(block, fetches: Iterable[str], feeds: Iterable[str] = ()) -> list[int]:
    """Indices, in block order, of the ops of ``block`` whose outputs the final values of ``fetches`` depend on."""
    fed = set(feeds)
    need = set(fetches) - fed
    keep = []
    for i in range(len(block.ops) - 1, -1, -1):
        op = block.ops[i]
        outs = op.output_arg_names
        if need.isdisjoint(outs):
            continue
        keep.append(i)
        need.difference_update(outs)
        need.update(n for n in op.input_arg_names if n not in fed)
    keep.reverse()
    return keep


def required_inputs(block) -> tuple[list[str], list[str]]:
    """``(feeds, persistables)``: the names ``block``'s ops read before any of its ops writes them.

    The first list holds the non-persistable ones (a run must feed them), the
    second the persistable ones (a run reads them from the scope), each in
    first-read order.
    """
    written: set[str] = set()
    feeds: dict[str, None] = {}
    persistables: dict[str, None] = {}
    for op in block.ops:
        for name in op.input_arg_names:
            if name not in written:
                var = block.find_var(name)
                (persistables if var is not None and var.persistable else feeds)[name] = None
        written.update(op.output_arg_names)
    return list(feeds), list(persistables)


def _check_names(block, names: Sequence[str], what: str) -> None:
    for name in names:
        if block.find_var(name) is None:
            known = ", ".join(sorted(block.vars)[:12])
            raise PruneError(f"block {block.idx}: {what} '{name}' names no var of the program (vars: {known}, ...)")


def _check_fed(block, feeds: Sequence[str]) -> None:
    """A PruneError naming the first op that reads a non-persistable var that is neither fed nor made earlier."""
    available = set(feeds)
    for i, op in enumerate(block.ops):
        for name in op.input_arg_names:
            var = block.find_var(name)
            if name not in available and not (var is not None and var.persistable):
                fed = ", ".join(feeds) or "nothing"
                raise PruneError(f"{op_location(block, i, op.type, op.callsite)} needs {describe_var(block, name)}, "
                                 f"which is not among the feeds ({fed}) and no kept op makes it")
        available.update(op.output_arg_names)


def _check_forward_only(block) -> None:
    for i, op in enumerate(block.ops):
        if op.role != "forward":
            raise PruneError(f"{op_location(block, i, op.type, op.callsite)} is a {op.role} op that the fetches "
                             "need: an inference program keeps forward ops only (fetch forward vars, or keep the "
                             "training ops: for_test=False, or --keep-training-ops)")


def _drop_unused_vars(block, keep: Iterable[str]) -> None:
    used = set(keep)
    for op in block.ops:
        used.update(op.input_arg_names)
        used.update(op.output_arg_names)
    for name in [n for n in block.vars if n not in used]:
        block.remove_var(name)


def _set_test_mode(program: Program) -> None:
    for block in program.blocks:
        for op in block.ops:
            schema = OP_SCHEMAS.get(op.type)
            if schema is not None and "is_test" in schema.attrs:
                block.set_attr(op, "is_test", True)


def prune(program: Program, fetches: Sequence[str | Variable], feeds: Sequence[str | Variable] | None = None,
          for_test: bool = False) -> Program:
    """A copy of ``program`` holding only the ops the final values of ``fetches`` (names or Variables) depend on.

    ``feeds`` (names) cut the walk and must supply every non-persistable
    input the kept ops read (a PruneError names the op that lacks one); with
    ``feeds=None`` whatever the kept ops read becomes a feed. Vars no kept op
    touches are dropped, as are the sub-blocks of dropped ops. ``for_test``
    makes an inference program: every kept op must be a forward op, and ops
    with an ``is_test`` attr (dropout, batch norm) switch to inference.
    """
    fetches, feed_list = var_names(fetches, "fetches", PruneError), var_names(list(feeds or ()), "feeds", PruneError)
    if not fetches:
        raise PruneError("prune needs at least one fetch")
    source = program.global_block()
    _check_names(source, fetches, "fetch")
    _check_names(source, feed_list, "feed")
    keep = needed_ops(source, fetches, feed_list)
    copy = program.clone()
    block = copy.global_block()
    kept = set(keep)
    dropped = [i for i in range(len(block.ops)) if i not in kept]
    dropped_blocks = {b for i in dropped for b in owned_blocks(block.ops[i])}
    block.remove_ops(dropped)
    copy.remove_blocks(dropped_blocks)
    _drop_unused_vars(block, [*fetches, *feed_list])
    if feeds is not None:
        _check_fed(block, feed_list)
    if for_test:
        _check_forward_only(block)
        _set_test_mode(copy)
    copy._touch()
    return copy


__all__ = ["PruneError", "needed_ops", "required_inputs", "prune"]
