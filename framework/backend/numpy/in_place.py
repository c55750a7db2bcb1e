"""The run's last parameter updates, written into the scope's own arrays inside the commit.

A fused product-and-update (``fusion``) normally writes the new parameter into
a spare buffer: it must copy the parameter there first, because a GEMM
accumulates onto what C holds, and the copy is not cheap (the seed MLP's
800 KB ``w1``: the copy and the product after it took 155 us against 100 us
for the product written onto ``w1`` itself, float64, two threads). Writing
onto the scope's array skips the copy, but a run that fails or is
interrupted after such a write would leave that parameter a step ahead of
the others.

So only the plan's **tail** may write in place: the trailing steps that are
all fused updates, which run after every other op has succeeded. Each is
*prepared* first (shapes checked, small products computed aside;
``blas.prepare_gemm``), and the writes are made inside the commit, together
with the scope update, while a KeyboardInterrupt is held back until all of
them are done (``runtime/commit.held_interrupts``). A run goes in place only when every
tail step can: the parameter is not fed, it is this scope's own array
(not a parent's), writeable and C-contiguous, and nobody else holds it (an
array a user took from the scope keeps its values, as with double buffering).
Otherwise the tail runs as ordinary steps. Checking plans never go in place.

The tail is also where memory is saved. An update that runs mid-run must
write into a spare buffer (the scope keeps the old parameter until the
commit), so a plan that hoists every update holds a second copy of every
parameter it trains: the 50-layer MLP's 200 MiB of weights became 400. A
fused update reads only its product's two operands, so ``sink_updates``
moves every update whose parameter outweighs those operands to the tail:
the operands stay alive until the commit instead (two 1 MiB activations per
4 MiB weight there), and the parameter is written where it lies.
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .fusion import is_gemm_update
from .plan_data import static_size

__all__ = ["in_place_tail", "prepare_in_place", "sink_updates"]

def _outweighs(block, unit) -> bool:
    """True when the fused update's parameter has more elements than its product's two operands."""
    prod, upd = (block.ops[i] for i in unit.ops)
    weigh = lambda name: static_size(tuple(block.var(name).shape))  # noqa: E731
    return weigh(upd.input("Param")[0]) > weigh(prod.input("X")[0]) + weigh(prod.input("Y")[0])


def sink_updates(block, units: Sequence) -> list:
    """``units`` with each fused product-and-update whose parameter has more elements than the product's two
    operands moved to the end (the in-place tail), where nothing after it reads what it writes or writes what
    it reads; the moved units keep their order. Every op still sees the values it saw before."""
    last_read: dict[str, int] = {}
    last_write: dict[str, int] = {}
    for at, unit in enumerate(units):
        for name in unit.ins:
            last_read[name] = at
        for name in unit.outs:
            last_write[name] = at
    sinking, staying = [], []
    for at, unit in enumerate(units):
        movable = (is_gemm_update(block, unit)
                   and all(last_write.get(n, -1) < at for n in unit.ins if n not in unit.outs)
                   and all(last_read.get(n, -1) <= at and last_write[n] == at for n in unit.outs))
        if movable and _outweighs(block, unit):
            sinking.append(unit)
        else:
            staying.append(unit)
    return staying + sinking


def in_place_tail(block, units: Sequence) -> int:
    """How many trailing ``units`` are fused product-and-update units (the steps that may write in place)."""
    count = 0
    for unit in reversed(units):
        if not is_gemm_update(block, unit):
            break
        count += 1
    return count


def prepare_in_place(steps: Sequence, writers: Sequence[Callable[..., Any]], env: dict, feed: Mapping[str, Any],
                     scope) -> list[Callable[[], Any]] | None:
    """The writes that update the tail ``steps``' parameters in place, prepared; None when one of them cannot
    go in place (then the caller runs the tail as ordinary steps). ``writers[i](x, y, param, lr)`` prepares
    step i's write."""
    writes = []
    for step, writer in zip(steps, writers):
        name = step.out
        param = env[name]
        # References: the scope's dict, env, ``param``, getrefcount's argument. Any more: someone else holds it.
        if (name in feed or scope.own(name) is not param or sys.getrefcount(param) > 4
                or not isinstance(param, np.ndarray) or not param.flags.writeable or not param.flags.c_contiguous):
            return None
        x, y, _, lr = step.take(env)
        if np.may_share_memory(param, x) or np.may_share_memory(param, y):
            return None
        try:
            writes.append(writer(x, y, param, lr))
        except ValueError:  # operands that do not fit: the ordinary step reports it with the op's name
            return None
    return writes
