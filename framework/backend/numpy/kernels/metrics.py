"""The metric ops (``program/ops/metrics.py``) state their math and are derived (``derived``); what they ask of
this engine is ``xp.tally``, numpy's ``bincount``."""
from __future__ import annotations

import numpy as np

__all__ = ["PRIMITIVES"]


def tally(ids: np.ndarray, length: int) -> np.ndarray:
    """How many of ``ids`` (int64, each in [0, length)) are each of 0 .. length - 1, as int64."""
    return np.bincount(ids, minlength=length)


PRIMITIVES = {"tally": tally}
"""The counts the metrics' computes call as ``xp.tally``."""
