"""The metric ops (``program/ops/metrics.py``) state their math and are derived (``derived``); what they ask of
this engine is ``xp.tally``, ``jnp.bincount`` at a static length. A label outside ``[0, C)`` and a NaN prediction
are the computes' ``xp.check``s, run-time checks of the compiled step here."""
from __future__ import annotations

import jax.numpy as jnp

__all__ = ["PRIMITIVES"]


def tally(ids, length: int):
    """How many of ``ids`` (int64, each in [0, length)) are each of 0 .. length - 1, as int64."""
    return jnp.bincount(ids, length=length)


PRIMITIVES = {"tally": tally}
"""The counts the metrics' computes call as ``xp.tally``."""
