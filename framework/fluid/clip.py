"""``fluid.clip``: Paddle's global-norm gradient clipping, given to a ``fluid.optimizer`` as ``grad_clip=``.

It becomes the optimizer's ``grad_clip`` (every gradient scaled by
``clip_norm / max(global_norm, clip_norm)``).
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GradientClipByGlobalNorm"]


@dataclass(frozen=True)
class GradientClipByGlobalNorm:
    """All gradients scaled together so their joint L2 norm is at most ``clip_norm``."""

    clip_norm: float
    group_name: str = "default_group"
