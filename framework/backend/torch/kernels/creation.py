"""Hand-written torch kernels of the creation family: the seeded draws, made on the host as every engine makes
them (the constants, fills, copies and casts are derived from their computes, ``program/ops/creation.py``)."""
from __future__ import annotations

import numpy as np
import torch

from ...shared.creation import random_draw

__all__ = ["KERNELS"]


def drawn(op):
    """The seeded draw made on the host as every engine makes it (``shared/creation``): the same numbers."""
    draw = random_draw(op)
    return lambda: torch.from_numpy(np.ascontiguousarray(draw()))


KERNELS = {"uniform_random": drawn, "gaussian_random": drawn}
