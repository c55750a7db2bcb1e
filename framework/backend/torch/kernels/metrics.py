"""The metric ops (``program/ops/metrics.py``) state their math and are derived (``derived``); what they ask of
this engine is ``xp.tally``, ``torch.bincount``."""
from __future__ import annotations

import torch

__all__ = ["PRIMITIVES"]


def tally(ids: torch.Tensor, length: int) -> torch.Tensor:
    """How many of ``ids`` (int64, each in [0, length)) are each of 0 .. length - 1, as int64."""
    return torch.bincount(ids, minlength=length)


PRIMITIVES = {"tally": tally}
"""The counts the metrics' computes call as ``xp.tally``."""
