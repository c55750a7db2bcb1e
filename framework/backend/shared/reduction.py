"""Which axes a reduction op reduces, read from its attrs one way for every engine."""
from __future__ import annotations

__all__ = ["axes_of"]


def axes_of(op, rank: int) -> tuple[int, ...] | None:
    """The axes ``dim`` names, each normalized against ``rank``; None (every axis) with ``reduce_all`` or no
    ``dim``."""
    dim = op.attr("dim")
    if op.attr("reduce_all") or not dim:
        return None
    return tuple(d % rank for d in dim)
