"""Lowerings of the creation family's seeded random draws (its constants, fills, copies and casts are derived from
their computes, ``program/ops/creation.py``): made on the host with numpy as the numpy kernels make them
(``shared/creation``), so both engines give the same numbers, bit for bit. Block 0's draws come into the step as
inputs (``compile.HOST_COMPUTED``); a sub-block's are made here."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

from ...shared.creation import random_sample, random_stream

__all__ = ["LOWERINGS"]


def _random_draw(op, ctx):
    """A seeded random op outside block 0 (block 0's come in as host inputs: ``compile.HOST_COMPUTED``). Without
    ``redraw`` every run gives the same array: the numpy kernel's, made while tracing, as a constant. With it,
    each execution draws on the host from a stream seeded as the numpy kernel's, one per compiled block as the
    numpy backend keeps one per plan (``ctx.host_state``), through an ``io_callback`` XLA neither drops nor repeats."""
    if not op.attr("redraw"):
        value = random_sample(op, random_stream(op))
        return lambda: jnp.asarray(value)
    stream = ctx.host_state.setdefault(("random", ctx.where), random_stream(op))  # restored on a re-run
    shape, dtype = tuple(op.attr("shape")), np.dtype(op.attr("dtype"))
    return lambda: io_callback(lambda: random_sample(op, stream), jax.ShapeDtypeStruct(shape, dtype))


LOWERINGS = {"uniform_random": _random_draw, "gaussian_random": _random_draw}
