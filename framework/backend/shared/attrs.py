"""An op's attrs and its vars' declared types, read one way for every engine: a numpy kernel and an xla lowering
of the same op normalize its axis and pick its dtypes alike, at the time the kernel or lowering is built."""
from __future__ import annotations

import numpy as np

__all__ = ["in_dtype", "op_axis", "out_dtype", "rank_of"]


def rank_of(op, slot: str = "X") -> int:
    """The declared rank of the first var in input ``slot``."""
    return len(op.block.var(op.input(slot)[0]).shape)


def op_axis(op, slot: str = "X") -> int:
    """The ``axis`` attr normalized against the rank of the slot's first var (0 for a scalar)."""
    rank = rank_of(op, slot)
    return op.attr("axis") % rank if rank else 0


def in_dtype(op, slot: str = "X", k: int = 0) -> np.dtype:
    """The declared dtype of var ``k`` of input ``slot``."""
    return np.dtype(op.block.var(op.input(slot)[k]).dtype)


def out_dtype(op, slot: str = "Out", k: int = 0) -> np.dtype:
    """The declared dtype of var ``k`` of output ``slot``."""
    return np.dtype(op.block.var(op.output(slot)[k]).dtype)

