"""``data_parallel``: make one training program run on many ranks, each on its own shard of the batch.

The same program runs on every rank. After the pass, each gradient an
optimize op reads is summed across ranks (and divided by their number when
``average``) before its first reader, so every rank applies the same update
to the same parameters. As in Paddle's collective transpiler, the reduction
is ops in the program:

    allreduce_start(X=[w2@GRAD, b2@GRAD]) -> Out=allreduce@bucket_0    right after the last of them is made
    ...the rest of the backward pass runs while the sum travels...
    allreduce_wait(Buffer=allreduce@bucket_0, X=[...]) -> Out=[w2@GRAD, b2@GRAD]   right before their first reader

Gradients travel in buckets: flat buffers of about ``bucket_bytes``, filled
in the order backward makes the gradients, so many small gradients cost one
message and the first bucket leaves while later layers are still being
differentiated. No engine reorders ops, so each wait runs where it is put:
before the first update (role ``optimize``), which the optimizer appends after
the whole backward pass.

The startup program gets one ``broadcast`` of every persistable var it
initializes, so every rank begins from rank 0's parameters and optimizer state.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from gradgen.program.describe import describe_var, op_location

from ..errors import DistributedError

__all__ = ["data_parallel", "Bucket", "DEFAULT_BUCKET_BYTES", "COLLECTIVE_OPS"]

DEFAULT_BUCKET_BYTES = 25 * 2 ** 20
"""25 MiB, PyTorch DDP's default: large enough that per-message latency is a small share of the time."""

COLLECTIVE_OPS = ("allreduce_start", "allreduce_wait", "broadcast")


class Bucket(NamedTuple):
    """One flat buffer of gradients: its var, the gradients in it (in order), its size and its two ops' indexes."""

    buffer: str
    grads: tuple[str, ...]
    nbytes: int
    start: int
    """Index in block 0 of its ``allreduce_start`` op (after the pass)."""
    wait: int
    """Index in block 0 of its ``allreduce_wait`` op (after the pass)."""


class _Grad(NamedTuple):
    name: str
    made: int
    """Index of the last op that writes it."""
    needed: int
    """Index of the first op after that one that reads it (len(ops) when none does)."""
    nbytes: int
    dtype: str


def _reduced_grads(block) -> list[str]:
    """Vars a backward op writes and an optimize op reads: the gradients the updates consume."""
    made = {n for op in block.ops if op.role == "backward" for n in op.output_arg_names}
    return list(dict.fromkeys(n for op in block.ops if op.role == "optimize" for n in op.input_arg_names if n in made))


def _grad_facts(block, names: Sequence[str]) -> list[_Grad]:
    ops = block.ops
    last_writer: dict[str, int] = {}
    for i, op in enumerate(ops):
        for n in op.output_arg_names:
            last_writer[n] = i
    facts = []
    for name in names:
        var = block.find_var(name)
        if var is None or name not in last_writer:
            raise DistributedError(f"block {block.idx}: gradient '{name}' is not made by any op of the block")
        made = last_writer[name]
        if -1 in var.shape or not var.dtype.startswith("float"):
            raise DistributedError(f"{op_location(block, made, ops[made].type, ops[made].callsite)} makes gradient "
                                   f"{describe_var(block, name)}: all-reduce buckets need float gradients of fully "
                                   "known shape")
        needed = next((j for j in range(made + 1, len(ops)) if name in ops[j].input_arg_names), len(ops))
        nbytes = int(np.prod(var.shape, dtype=np.int64)) * np.dtype(var.dtype).itemsize
        facts.append(_Grad(name, made, needed, nbytes, var.dtype))
    return sorted(facts, key=lambda g: g.made)


def _buckets(grads: Sequence[_Grad], bucket_bytes: int) -> list[list[_Grad]]:
    """Gradients in making order, grouped per dtype until a group reaches ``bucket_bytes``.

    A group also closes when the next gradient is made only after some gradient
    of the group is already needed: its sum must start before that.
    """
    closed: list[list[_Grad]] = []
    open_: dict[str, list[_Grad]] = {}
    for g in grads:
        group = open_.get(g.dtype)
        if group and min(x.needed for x in group) <= g.made:
            closed.append(open_.pop(g.dtype))
        group = open_.setdefault(g.dtype, [])
        group.append(g)
        if sum(x.nbytes for x in group) >= bucket_bytes:
            closed.append(open_.pop(g.dtype))
    closed.extend(open_.values())
    return sorted(closed, key=lambda group: group[-1].made)


def _broadcast_startup(startup) -> None:
    block = startup.global_block()
    names = list(dict.fromkeys(n for op in block.ops for n in op.output_arg_names if block.var(n).persistable))
    if names:
        block.append_op("broadcast", {"X": names}, {"Out": names}, {"root": 0})


def data_parallel(program, startup_program=None, *, bucket_bytes: int = DEFAULT_BUCKET_BYTES, average: bool = True,
                  grads: Sequence[str] | None = None) -> list[Bucket]:
    """Insert the all-reduce of every gradient into ``program`` (in place); return the buckets.

    ``average`` divides each sum by the number of ranks: right when the loss
    is a mean over the batch (each rank's gradient is then its shard's mean).
    For a loss that sums over the batch, pass ``average=False``: the sum of the
    ranks' gradients is then the whole batch's. ``grads`` names the gradients
    to reduce (default: those that optimize ops read). ``startup_program``,
    when given, gets a broadcast of rank 0's initial values.

    >>> params_grads = optimizer.SGD(0.1).minimize(loss)[1]
    >>> [b.grads for b in data_parallel(main, startup, bucket_bytes=1 << 20)]
    [('w2@GRAD', 'w1@GRAD')]
    """
    if bucket_bytes <= 0:
        raise DistributedError(f"bucket_bytes must be positive, got {bucket_bytes}")
    block = program.global_block()
    for i, op in enumerate(block.ops):
        if op.type in COLLECTIVE_OPS:
            raise DistributedError(f"{op_location(block, i, op.type, op.callsite)}: the program already "
                                   "communicates; data_parallel applies once")
    names = _reduced_grads(block) if grads is None else list(grads)
    if not names:
        raise DistributedError(f"block {block.idx}: no gradient to all-reduce (no optimize op reads a gradient a "
                               "backward op makes); run an optimizer's minimize first, or pass grads=[...]")
    groups = _buckets(_grad_facts(block, names), bucket_bytes)
    # (index, 0 for a start / 1 for a wait, bucket): inserted from the end, so earlier indexes stay true; at one
    # index the wait goes in first, so the start lands before it.
    inserts = []
    for k, group in enumerate(groups):
        inserts.append((group[-1].made + 1, 0, k))
        inserts.append((min(g.needed for g in group), 1, k))
    buffers = []
    for group in groups:  # declared first: the waits, inserted before their starts, read them
        var = block.create_var(program.unique_name("allreduce@bucket"),
                               (sum(int(np.prod(block.var(g.name).shape, dtype=np.int64)) for g in group),),
                               group[0].dtype, stop_gradient=True)
        buffers.append(var.name)
    made_ops: dict[tuple[int, int], object] = {}
    for index, kind, k in sorted(inserts, reverse=True):
        group_names = [g.name for g in groups[k]]
        if kind == 0:
            op = block.insert_op(index, "allreduce_start", {"X": group_names}, {"Out": [buffers[k]]}, role="backward")
        else:
            op = block.insert_op(index, "allreduce_wait", {"Buffer": [buffers[k]], "X": group_names},
                                 {"Out": group_names}, {"average": bool(average)}, role="backward")
        made_ops[(k, kind)] = op
    at = {id(op): i for i, op in enumerate(block.ops)}
    if startup_program is not None:
        _broadcast_startup(startup_program)
    return [Bucket(buffers[k], tuple(g.name for g in group), sum(g.nbytes for g in group),
                   at[id(made_ops[(k, 0)])], at[id(made_ops[(k, 1)])]) for k, group in enumerate(groups)]
