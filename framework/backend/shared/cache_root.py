"""Where gradgen keeps what it learns in one process for the next: ``$GRADGEN_CACHE_DIR`` (default
``~/.cache/gradgen``). The xla engine's compiled executables live under ``xla/`` and ``backend="auto"``'s
choices under ``choices/``; delete the folder to forget both."""
from __future__ import annotations

import os

__all__ = ["CACHE_DIR_ENV", "cache_root"]

CACHE_DIR_ENV = "GRADGEN_CACHE_DIR"


def cache_root() -> str:
    """The folder every cache of gradgen's lives under."""
    return os.environ.get(CACHE_DIR_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "gradgen")
