"""Recompute (gradient checkpointing): keep only checkpoints alive, re-run the forward in between.

Chen et al., "Training Deep Nets with Sublinear Memory Cost" (2016): split the
forward ops into segments at the checkpoint vars; instead of keeping every
activation alive until the backward part reads it, re-emit the ops of each
segment inside the backward part, right before the first grad op that needs
one of the segment's values, and point the grad ops at those copies. The
originals then die during the forward run. With about sqrt(n) checkpoints on a
chain of n layers, about 2 sqrt(n) activations are alive at once, for one
extra forward pass.

It is a rewrite in two steps around the backward pass:
``plan_recompute`` checks the checkpoints and reads the forward part before
any grad op exists; ``apply_recompute`` inserts the copies (role
``backward``, ``forward_op`` = the op copied, outputs ``name@RECOMPUTE``) and
renames the grad ops' reads. ``append_backward(loss, checkpoints=...)`` calls
both. Gradients are bit-identical with and without checkpoints: the copies
run the same kernels on the same inputs.

Some values are kept rather than recomputed (they are "held"): the
checkpoints; every output of an op that must not run twice (a stateful op
such as dropout, whose random mask would differ; an op writing a persistable
var, such as batch norm's running statistics; an op with a sub-block; an op
touching a var written more than once); values read by a forward op of a later
segment (recomputing them would chain the segments together); and the values
of the last segment, after the last checkpoint, whose grad ops run right after
the forward part anyway.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Iterable, Sequence

from gradgen.program import OP_SCHEMAS
from gradgen.program.variable import Variable

from .backward_context import NameAllocator
from ..errors import BackwardError

RECOMPUTE_SUFFIX = "@RECOMPUTE"


@dataclass(frozen=True)
class RecomputePlan:
    """What the rewrite needs to know of the forward part (``block.ops[:forward_ops]``).

    ``recomputable`` maps each value that may be recomputed to its producer op's index;
    ``segment[i]`` is the segment of forward op i.
    """

    forward_ops: int
    segment: tuple[int, ...]
    recomputable: dict[str, int]
    checkpoints: tuple[str, ...]


def _checkpoint_names(block, checkpoints: Iterable, used: set[str]) -> list[str]:
    """The checkpoints as var names; a BackwardError for an unknown name or a var the forward part never uses."""
    names = []
    for c in checkpoints:
        if isinstance(c, Variable):
            if c.block.program is not block.program:
                raise BackwardError(f"checkpoint '{c.name}' is a var of another program")
            name = c.name
        elif isinstance(c, str):
            name = c
        else:
            raise BackwardError(f"a checkpoint must be a Variable or a var name, got {type(c).__name__} {c!r}")
        if block.find_var(name) is None:
            raise BackwardError(f"checkpoint '{name}' names no var of block {block.idx}")
        if name not in used:
            raise BackwardError(f"checkpoint '{name}' is not read or written by any op of the forward part "
                                f"(block {block.idx}, ops #0-#{len(block.ops) - 1})")
        names.append(name)
    return names


def _must_not_rerun(block, op, written_twice: set[str]) -> bool:
    """Whether running ``op`` a second time could change a result or the program's state."""
    schema = OP_SCHEMAS.get(op.type)
    if schema is None or schema.stateful:
        return True
    if any(spec.kind == "block" for spec in schema.attrs.values()):
        return True
    if any(n in written_twice for n in op.input_arg_names + op.output_arg_names):
        return True
    return any(block.var(n).persistable for n in op.output_arg_names)


def plan_recompute(block, checkpoints: Iterable) -> RecomputePlan:
    """Check ``checkpoints`` against the ops now in ``block`` (the forward part) and decide what may be recomputed.

    Call it before the backward pass appends anything. Raises BackwardError for a
    checkpoint that is unknown or unused by the forward part.
    """
    ops = block.ops
    used = {n for op in ops for n in op.input_arg_names + op.output_arg_names}
    names = _checkpoint_names(block, checkpoints, used)
    producer: dict[str, int] = {}
    written_twice: set[str] = set()
    for i, op in enumerate(ops):
        for n in op.output_arg_names:
            if n in producer:
                written_twice.add(n)
            producer[n] = i
    boundaries = sorted({producer[n] for n in names if n in producer})
    segment = tuple(bisect.bisect_left(boundaries, i) for i in range(len(ops)))
    last = len(boundaries)
    held = set(names) | written_twice
    for i, op in enumerate(ops):
        if segment[i] == last or _must_not_rerun(block, op, written_twice):
            held.update(op.output_arg_names)
        held.update(n for n in op.input_arg_names if n in producer and segment[producer[n]] != segment[i])
    recomputable = {n: i for n, i in producer.items() if n not in held}
    return RecomputePlan(len(ops), segment, recomputable, tuple(names))


def _needed_ops(plan: RecomputePlan, ops, wanted: set[str]) -> list[int]:
    """Indices, in program order, of the forward ops that remake ``wanted`` from held values."""
    found: set[int] = set()
    stack = list(wanted)
    while stack:
        i = plan.recomputable[stack.pop()]
        if i in found:
            continue
        found.add(i)
        stack.extend(n for n in ops[i].input_arg_names if n in plan.recomputable)
    return sorted(found)


def apply_recompute(block, plan: RecomputePlan) -> dict[str, str]:
    """Re-emit forward segments before their first grad-op reader and rename those reads; return the renames.

    The grad ops are ``block.ops[plan.forward_ops:]``. A segment none of whose
    recomputable values a grad op reads is left alone.
    """
    ops = block.ops
    first_reader: dict[int, int] = {}
    wanted: dict[int, set[str]] = {}
    for j in range(plan.forward_ops, len(ops)):
        for n in ops[j].input_arg_names:
            i = plan.recomputable.get(n)
            if i is not None:
                s = plan.segment[i]
                first_reader.setdefault(s, j)
                wanted.setdefault(s, set()).add(n)
    names = NameAllocator(block)
    copied: dict[str, str] = {}
    groups = []
    for s in sorted(wanted):
        clones = _needed_ops(plan, ops, wanted[s])
        for i in clones:
            for n in ops[i].output_arg_names:
                copied[n] = names.fresh(n + RECOMPUTE_SUFFIX)
        groups.append((first_reader[s], s, [ops[i] for i in clones]))
    # A copy may also remake a held value (a checkpoint made by the same op): its readers keep the original,
    # which may be read before the copy exists. Recomputable reads are all after it, by construction.
    rename = {n: c for n, c in copied.items() if n in plan.recomputable}
    for op in ops[plan.forward_ops:]:  # only the grad ops' reads change
        block.rename_inputs(op, rename)
    for at, _, clones in sorted(groups, key=lambda g: (g[0], g[1]), reverse=True):
        for k, fwd in enumerate(clones):
            ins = {slot: [rename.get(n, n) for n in args] for slot, args in fwd.inputs.items()}
            outs = {slot: [copied[n] for n in args] for slot, args in fwd.outputs.items()}
            block.insert_op(at + k, fwd.type, ins, outs, dict(fwd.attrs), role="backward", forward_op=fwd,
                            callsite=fwd.callsite)
    return rename


def evenly_spaced_checkpoints(candidates: Sequence, count: int | None = None) -> list:
    """``count`` of ``candidates`` (vars or names, in forward order) splitting them into equal runs.

    The default count is round(sqrt(n)) for n candidates, which minimizes
    checkpoints plus the longest run between them (Chen et al. 2016). Give it
    the activations of a chain, e.g. ``outputs_of_type(block, "relu")``.

    >>> evenly_spaced_checkpoints(["h1", "h2", "h3", "h4", "h5", "h6", "h7", "h8", "h9"])
    ['h3', 'h5', 'h7']
    """
    n = len(candidates)
    count = round(math.sqrt(n)) if count is None else count
    if not 0 <= count <= n:
        raise BackwardError(f"cannot pick {count} checkpoints from {n} candidates")
    # The k-th of count + 1 equal runs ends at candidate ceil(k n / (count + 1)) (1-based): distinct for count <= n.
    return [candidates[(k * n + count) // (count + 1) - 1] for k in range(1, count + 1)]


def outputs_of_type(block, op_type: str, slot: str = "Out") -> list[Variable]:
    """The ``slot`` outputs of every op of ``op_type`` in ``block``, in program order: a chain's activations."""
    return [block.var(n) for op in block.ops if op.type == op_type for n in op.output(slot)]


__all__ = ["RecomputePlan", "plan_recompute", "apply_recompute", "evenly_spaced_checkpoints", "outputs_of_type",
           "RECOMPUTE_SUFFIX"]
