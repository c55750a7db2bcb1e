"""``fluid.core``: the one name Paddle's book code takes from its C++ core, ``Scope``."""
from __future__ import annotations

from ..runtime.scope import Scope


def is_compiled_with_cuda() -> bool:
    """gradgen runs on numpy, on the CPU."""
    return False


__all__ = ["Scope", "is_compiled_with_cuda"]
