"""The array namespace the xla engine hands to an op's ``compute`` (``OpSchema.compute``): ``jax.numpy``'s
functions, plus ``erf`` (``jax.scipy.special.erf``)."""
from __future__ import annotations

from types import SimpleNamespace

import jax.numpy as jnp
from jax.scipy.special import erf

__all__ = ["XP"]

XP = SimpleNamespace(**{name: getattr(jnp, name) for name in dir(jnp) if not name.startswith("_")}, erf=erf)
"""jax.numpy as ``xp``."""
