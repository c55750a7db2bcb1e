"""Kernels of the control-flow ops: run the owned sub-blocks on numpy.

The plan compiles the sub-blocks ``SUBBLOCKS`` names before it builds the
op's kernel (so a sub-block that cannot run fails before any op does) and
hands the factory one runner per sub-block: ``blocks[key](env)`` runs it on
``env`` (a fresh dict per run, so nothing one iteration makes is
overwritten by the next) and returns its fetches. A checking plan compiles
checking sub-plans, so the checks reach inside. ``while`` records the loop
values at the start of every iteration and returns them stacked as
``History`` (unless the plan drops it unread: a factory declaring a keyword-only
``dropped`` is told which of its outputs nobody reads).

A gradient loop reads its forward loop's body values back instead of
recomputing them where ``shared/loop_read_back`` finds it can: the plan
links the two loops' kernels through one ``RowStash`` (``loop_stashes``),
the forward loop's body also returns the values the gradient loop needs
and the kernel keeps them, one per iteration, and the gradient loop runs a
body without the read-back ops, fed those rows. It does so only when it
starts from that forward run's own ``Steps`` and gets the same outer arrays
(identity, checked every run); otherwise it recomputes, as before.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

from ...shared.loop_read_back import Replay, forward_read_back
from .signature import SubBlock


def _truth(value, what: str) -> bool:
    if type(value) is np.bool_:  # what a comparison of 0-d arrays returns, in every iteration of a loop: 0.1 us
        return bool(value)
    if type(value) is np.ndarray and value.size == 1:  # (np.size and np.asarray below: 1 us)
        return bool(value.item())
    if np.size(value) != 1:
        raise ValueError(f"{what} must hold exactly one bool, got shape {list(np.shape(value))}")
    return bool(np.asarray(value).reshape(-1)[0])


def _shape(value) -> tuple:
    try:
        return value.shape  # arrays and numpy scalars (a loop counter): 0.05 us; np.shape 0.5 us
    except AttributeError:
        return np.shape(value)


def cond_blocks(op) -> dict[str, SubBlock]:
    """Each branch is fed the op's ``Input`` vars and returns its ``*_outs``."""
    inputs = op.input("Input")
    return {key: SubBlock(op.attr(f"{key}_block"), inputs, op.attr(f"{key}_outs")) for key in ("true", "false")}


def cond(op, blocks):
    inputs = op.input("Input")
    branches = {True: blocks["true"], False: blocks["false"]}
    single = len(op.output("Out")) == 1

    def run(pred, *values):
        outs = branches[_truth(pred, "Cond")](dict(zip(inputs, values)))
        return outs[0] if single else tuple(outs)

    return run


def while_blocks(op, stash: "LoopStashes | None" = None) -> dict[str, SubBlock]:
    """The condition and the body are fed their parameter vars (the loop values) and the op's ``Input`` vars.
    Linked by ``stash`` (``loop_stashes``), a forward loop's body also returns what it keeps, and a gradient
    loop gets ``read_back`` too: its body without the read-back ops, fed their kept values."""
    stash = LoopStashes() if stash is None else stash
    inputs = op.input("Input")
    body_feeds = op.attr("body_params") + inputs
    body_fetches = op.attr("body_outs") + (stash.writes.names if stash.writes is not None else [])
    blocks = {"cond": SubBlock(op.attr("cond_block"), op.attr("cond_params") + inputs, [op.attr("cond_out")]),
              "body": SubBlock(op.attr("body_block"), body_feeds, body_fetches)}
    if stash.reads is not None:
        replay = stash.reads[1]
        blocks["read_back"] = SubBlock(op.attr("body_block"), body_feeds + list(replay.needed), body_fetches,
                                       frozenset(j for _, j in replay.pairs) | frozenset(replay.dead))
    return blocks


class RowStash:
    """What a forward loop keeps for the gradient loops that read its body back: ``names``, the body values they
    need; ``latest`` = (its ``Steps``, its outer arrays by name, its rows by name: one value per iteration) of its
    last run, one tuple, so a reader sees one whole run."""

    __slots__ = ("names", "readers", "latest", "unread")

    def __init__(self):
        self.names: list[str] = []
        self.readers = 0
        self.latest: tuple | None = None
        self.unread = 0
        """How many linked gradient loops have yet to read ``latest``: the last one lets it go."""


class LoopStashes(NamedTuple):
    """The stash a loop's kernel writes (as a forward loop) and the one it reads with its ``Replay`` (as a
    gradient loop); a gradient loop may be the forward loop of a second-order one, so both."""

    writes: RowStash | None = None
    reads: tuple[RowStash, Replay] | None = None


def loop_stashes(block, linkable: Callable[[Any], bool] = lambda op: True) -> dict[int, LoopStashes]:
    """Op index -> the ``LoopStashes`` of each loop of ``block`` linked to another; only ``linkable`` ops are
    (the plan's: those whose kernel factory takes a ``stash``). The links are worked out here, once per plan."""
    ops = block.ops
    writes: dict[int, RowStash] = {}
    reads: dict[int, tuple[RowStash, Replay]] = {}
    for j, op in enumerate(ops):
        found = forward_read_back(op) if op.type == "while" and linkable(op) else None
        if found is None or not linkable(found[0]):
            continue
        forward, replay = found
        stash = writes.setdefault(next(i for i, o in enumerate(ops) if o is forward), RowStash())
        stash.readers += 1
        stash.names += [n for n in replay.needed if n not in stash.names]
        reads[j] = (stash, replay)
    return {k: LoopStashes(writes.get(k), reads.get(k)) for k in {*writes, *reads}}


def while_(op, blocks, *, dropped: frozenset[str] = frozenset(), stash: LoopStashes = LoopStashes()):
    """``dropped``: outputs the plan drops right after the op (nothing reads or fetches them); a ``History``
    among them is neither recorded nor stacked (None in its place): a gradient loop's own ``History`` is
    T times its carried gradients (the RNN's: 4.8 MB a step, its ``np.stack`` 0.3-1 ms). ``stash``: the
    ``RowStash``es linking a forward loop to the gradient loops that read it back (``loop_stashes``)."""
    inputs, n = op.input("Input"), len(op.input("X"))
    cond_params, body_params = op.attr("cond_params"), op.attr("body_params")
    run_cond, run_body = blocks["cond"], blocks["body"]
    limit = op.attr("max_iterations")
    kept = [name not in dropped for name in op.output("History")]
    keeps = stash.writes  # (its names: what the body returns past the loop values)

    def run(*values):
        xs, outer = list(values[:n]), dict(zip(inputs, values[n:]))
        shapes = [_shape(x) for x in xs]  # every iteration's loop values have these
        history: list[list | None] = [[] if keep else None for keep in kept]
        records = [(record, k) for k, record in enumerate(history) if record is not None]
        rows: list[list] = [[] for _ in keeps.names] if keeps is not None else []
        body = run_body
        if stash.reads is not None:
            body = _reading_back(blocks["read_back"], *stash.reads, body_params[0], xs[0], outer) or run_body
        steps = 0
        while True:
            env = outer.copy()
            env.update(zip(cond_params, xs))
            if not _truth(run_cond(env)[0], "the loop condition"):
                break
            if limit is not None and steps >= limit:
                raise ValueError(f"the loop is still running after max_iterations={limit} iterations")
            for record, k in records:
                record.append(xs[k])
            env = outer.copy()
            env.update(zip(body_params, xs))
            new = body(env)
            if rows:
                for row, value in zip(rows, new[n:]):
                    row.append(value)
                new = new[:n]
            if [_shape(value) for value in new] != shapes:
                _changed_shape(new, shapes, steps)
            xs = new
            steps += 1
        stacked = [None if record is None else np.stack(record) if record else
                   np.empty((0,) + np.shape(x), np.asarray(x).dtype) for record, x in zip(history, xs)]
        steps = np.int64(steps)
        if keeps is not None:
            keeps.latest, keeps.unread = (steps, outer, dict(zip(keeps.names, rows))), keeps.readers
        return (*xs, *stacked, steps)

    return run


def _reading_back(run_read_back, stash: RowStash, replay: Replay, counter_param: str, counter, outer: dict):
    """The body a gradient loop starting at ``counter`` with outer arrays ``outer`` runs to read ``stash``'s
    rows back (row ``counter - 1`` in each iteration), or None when the stash is not of the forward run it
    reverses (then it recomputes)."""
    latest = stash.latest
    if latest is None or counter is not latest[0] or any(outer.get(n) is not latest[1].get(n) for n in replay.outer):
        return None
    stash.unread -= 1
    if stash.unread <= 0:
        stash.latest = None
    needed = replay.needed
    rows = [latest[2][name] for name in needed]

    def body(env: dict) -> list:
        index = int(env[counter_param]) - 1
        env.update((name, row[index]) for name, row in zip(needed, rows))
        return run_read_back(env)

    return body


def _changed_shape(new, shapes: list, steps: int) -> None:
    for k, value in enumerate(new):
        if _shape(value) != shapes[k]:
            raise ValueError(f"loop var {k} changed shape from {list(shapes[k])} to "
                             f"{list(_shape(value))} in iteration {steps} (loop vars keep their shape)")


KERNELS = {"cond": cond, "while": while_}
SUBBLOCKS = {"cond": cond_blocks, "while": while_blocks}
