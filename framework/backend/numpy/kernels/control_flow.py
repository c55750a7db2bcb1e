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
"""
from __future__ import annotations

import numpy as np

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


def while_blocks(op) -> dict[str, SubBlock]:
    """The condition and the body are fed their parameter vars (the loop values) and the op's ``Input`` vars."""
    inputs = op.input("Input")
    return {"cond": SubBlock(op.attr("cond_block"), op.attr("cond_params") + inputs, [op.attr("cond_out")]),
            "body": SubBlock(op.attr("body_block"), op.attr("body_params") + inputs, op.attr("body_outs"))}


def while_(op, blocks, *, dropped: frozenset[str] = frozenset()):
    """``dropped``: outputs the plan drops right after the op (nothing reads or fetches them); a ``History``
    among them is neither recorded nor stacked (None in its place): a gradient loop's own ``History`` is
    T times its carried gradients (the RNN's: 4.8 MB a step, its ``np.stack`` 0.3-1 ms)."""
    inputs, n = op.input("Input"), len(op.input("X"))
    cond_params, body_params = op.attr("cond_params"), op.attr("body_params")
    run_cond, run_body = blocks["cond"], blocks["body"]
    limit = op.attr("max_iterations")
    kept = [name not in dropped for name in op.output("History")]

    def run(*values):
        xs, outer = list(values[:n]), dict(zip(inputs, values[n:]))
        shapes = [_shape(x) for x in xs]  # every iteration's loop values have these
        history: list[list | None] = [[] if keep else None for keep in kept]
        records = [(record, k) for k, record in enumerate(history) if record is not None]
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
            new = run_body(env)
            if [_shape(value) for value in new] != shapes:
                _changed_shape(new, shapes, steps)
            xs = new
            steps += 1
        stacked = [None if record is None else np.stack(record) if record else
                   np.empty((0,) + np.shape(x), np.asarray(x).dtype) for record, x in zip(history, xs)]
        return (*xs, *stacked, np.int64(steps))

    return run


def _changed_shape(new, shapes: list, steps: int) -> None:
    for k, value in enumerate(new):
        if _shape(value) != shapes[k]:
            raise ValueError(f"loop var {k} changed shape from {list(shapes[k])} to "
                             f"{list(_shape(value))} in iteration {steps} (loop vars keep their shape)")


KERNELS = {"cond": cond, "while": while_}
SUBBLOCKS = {"cond": cond_blocks, "while": while_blocks}
