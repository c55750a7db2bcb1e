"""Build one op (or any program) with both modes and compare them: <J v, u> = <v, J^T u>."""
from __future__ import annotations

import numpy as np

from gradgen.framework import Executor, Scope, forward_gradients, gradients
from gradgen.program.dtypes import is_float
from tests.framework.op_harness import one_op_program


def both_modes(main, outs: list, ins: list, rng):
    """Append forward mode (tangents ``v@x``) and reverse mode (cotangents ``u@y``) of ``outs`` wrt ``ins``.

    Returns (tangents of outs, gradients of ins, {name: random array} to feed for v and u).
    """
    block = main.global_block()
    extra, vs, us = {}, [], []
    for x in ins:
        vs.append(block.create_var(f"v@{x.name}", x.shape, x.dtype, stop_gradient=True))
        extra[vs[-1].name] = rng.standard_normal(x.shape)
    for y in outs:
        us.append(block.create_var(f"u@{y.name}", y.shape, y.dtype, stop_gradient=True))
        extra[us[-1].name] = rng.standard_normal(y.shape)
    jv = forward_gradients(outs, ins, vs)
    jtu = gradients(outs, ins, target_gradients=us)
    return jv, jtu, extra


def dot_product_sides(main, outs, ins, feed, rng, scope=None) -> tuple[float, float]:
    """(<J v, u>, <v, J^T u>) for the program's ``outs`` wrt ``ins``, with random v and u."""
    jv, jtu, extra = both_modes(main, outs, ins, rng)
    feed = {**feed, **extra}
    fetch = [t for t in jv if t is not None] + [g for g in jtu if g is not None]
    values = iter(Executor(check_types=True).run(main, feed=feed, fetch_list=fetch, scope=scope or Scope()))
    lhs = sum(float(np.sum(next(values) * feed[f"u@{y.name}"])) for y, t in zip(outs, jv) if t is not None)
    rhs = sum(float(np.sum(feed[f"v@{x.name}"] * next(values))) for x, g in zip(ins, jtu) if g is not None)
    return lhs, rhs


def one_op(case):
    """The case's op in a program, its float outputs and float inputs, and the feed."""
    main, op, feed = one_op_program(case)
    block = main.global_block()
    outs = [block.var(n) for n in op.output_arg_names if is_float(block.var(n).dtype)]
    ins = [block.var(n) for n in op.input_arg_names if is_float(block.var(n).dtype)]
    return main, outs, list(dict.fromkeys(ins)), feed


FROZEN = {"batch_norm": ("Mean", "Variance", "MeanOut", "VarianceOut"), "batch_norm_grad": ("Mean", "Variance"),
          "relu_grad": ("Out",)}
"""Slots both modes treat as constant: running statistics (state, as in Paddle) and relu's mask, which the
kernel test cases put exactly at the kink."""


def unfrozen(main, names: list) -> list:
    """``names`` (vars of the one op of ``main``) without those in its ``FROZEN`` slots."""
    op = main.global_block().ops[0]
    frozen = {n for slot in FROZEN.get(op.type, ()) for n in op.inputs.get(slot, []) + op.outputs.get(slot, [])}
    return [v for v in names if v.name not in frozen]
