"""Stand-in xla lowerings of ``gather``, ``gather_grad`` and ``broadcast_to`` for the control-flow program tests,
used only while ``lower_tensor`` (another engineer's family, issue 22) has none: every loop gradient reads
History with ``gather``. ``stand_ins`` adds a stand-in only for an op type the table lacks, so once the real
lowerings land the tests run those, and this file can go.
"""
from __future__ import annotations

import pytest

__all__ = ["stand_ins"]


def _gather(op, ctx):
    import jax.numpy as jnp

    axis = op.attr("axis")

    def fn(x, index):
        n = x.shape[axis]
        ctx.check(jnp.all((index >= -n) & (index < n)), f"gather index out of range for an axis of {n}")
        if n == 0:  # a loop body that never runs is traced all the same
            return jnp.zeros(x.shape[:axis] + jnp.shape(index) + x.shape[axis + 1:], x.dtype)
        return jnp.take(x, jnp.where(index < 0, index + n, index), axis=axis)

    return fn


def _gather_grad(op, ctx):
    import jax.numpy as jnp

    axis = op.attr("axis")

    def fn(x, index, dout):
        ax = axis % x.ndim
        rows = jnp.reshape(dout, x.shape[:ax] + (int(jnp.size(index)),) + x.shape[ax + 1:])
        flat = jnp.reshape(index, -1)
        flat = jnp.where(flat < 0, flat + x.shape[ax], flat)
        moved = jnp.moveaxis(jnp.zeros(x.shape, dout.dtype), ax, 0).at[flat].add(jnp.moveaxis(rows, ax, 0))
        return jnp.moveaxis(moved, 0, ax)

    return fn


def _broadcast_to(op, ctx):
    import jax.numpy as jnp

    if op.input("ShapeLike"):
        return lambda x, like: jnp.broadcast_to(x, jnp.shape(like))
    shape = tuple(op.attr("shape"))
    return lambda x: jnp.broadcast_to(x, shape)


_STAND_INS = {"gather": _gather, "gather_grad": _gather_grad, "broadcast_to": _broadcast_to}


@pytest.fixture
def stand_ins(monkeypatch):
    """The lowering table with a stand-in for each of ``_STAND_INS`` it lacks (for this test only)."""
    from gradgen.framework.backend.xla import table

    for op_type, lowering in _STAND_INS.items():
        if op_type not in table.LOWERINGS:
            monkeypatch.setitem(table.LOWERINGS, op_type, lowering)
