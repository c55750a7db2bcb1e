"""Kernels of the control-flow ops: run the owned sub-blocks on numpy.

The sub-blocks are compiled when the owning op's kernel is built (so a
sub-block that cannot run fails before any op does) and walked by
``framework.subblock.run_block``. ``while`` records the loop values at the
start of every iteration and returns them stacked as ``History``.
"""
from __future__ import annotations

import numpy as np


def _truth(value, what: str) -> bool:
    if np.size(value) != 1:
        raise ValueError(f"{what} must hold exactly one bool, got shape {list(np.shape(value))}")
    return bool(np.asarray(value).reshape(-1)[0])


def cond(op):
    # Imported here: the sub-block runner compiles plans, and plans import this package's kernel table.
    from ..subblock import compile_block, run_block

    program, inputs = op.block.program, op.input("Input")
    plans = {taken: compile_block(program.block(op.attr(f"{key}_block")), inputs, op.attr(f"{key}_outs"))
             for taken, key in ((True, "true"), (False, "false"))}
    single = len(op.output("Out")) == 1

    def run(pred, *values):
        outs = run_block(plans[_truth(pred, "Cond")], dict(zip(inputs, values)))
        return outs[0] if single else tuple(outs)

    return run


def while_(op):
    from ..subblock import compile_block, run_block

    program, inputs, n = op.block.program, op.input("Input"), len(op.input("X"))
    cond_params, body_params = op.attr("cond_params"), op.attr("body_params")
    cond_plan = compile_block(program.block(op.attr("cond_block")), cond_params + inputs, [op.attr("cond_out")])
    body_plan = compile_block(program.block(op.attr("body_block")), body_params + inputs, op.attr("body_outs"))
    limit = op.attr("max_iterations")

    def run(*values):
        xs, outer = list(values[:n]), dict(zip(inputs, values[n:]))
        history: list[list] = [[] for _ in range(n)]
        steps = 0
        while True:
            env = dict(outer)
            env.update(zip(cond_params, xs))
            if not _truth(run_block(cond_plan, env)[0], "the loop condition"):
                break
            if limit is not None and steps >= limit:
                raise ValueError(f"the loop is still running after max_iterations={limit} iterations")
            for record, x in zip(history, xs):
                record.append(x)
            env = dict(outer)
            env.update(zip(body_params, xs))
            new = run_block(body_plan, env)
            for k, (old, value) in enumerate(zip(xs, new)):
                if np.shape(old) != np.shape(value):
                    raise ValueError(f"loop var {k} changed shape from {list(np.shape(old))} to "
                                     f"{list(np.shape(value))} in iteration {steps} (loop vars keep their shape)")
            xs = new
            steps += 1
        stacked = [np.stack(record) if record else np.empty((0,) + np.shape(x), np.asarray(x).dtype)
                   for record, x in zip(history, xs)]
        return (*xs, *stacked, np.int64(steps))

    return run


KERNELS = {"cond": cond, "while": while_}
