"""``fluid.regularizer``: Paddle's L2 weight decay, given to a ``fluid.optimizer`` as ``regularization=``.

It becomes the optimizer's ``weight_decay`` (``grad += coeff * param``). Paddle's
``L1Decay`` has no gradgen counterpart and is not offered.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["L2Decay", "L2DecayRegularizer"]


@dataclass(frozen=True)
class L2Decay:
    """``regularization_coeff * param`` added to each parameter's gradient."""

    regularization_coeff: float = 0.0


L2DecayRegularizer = L2Decay
