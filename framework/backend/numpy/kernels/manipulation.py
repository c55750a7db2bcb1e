"""Kernels of the manipulation ops that do not state their math over ``xp``: ``slice`` (Python slicing at the index
every engine takes, ``shared/manipulation``) and ``gather`` (a row read as a view where the index is one integer).
The others (sums of addends, broadcasts and their reductions, reshapes, stacks, splits, pads) are derived from
their ``compute`` (``derived``)."""
from __future__ import annotations

import numpy as np

from ...shared.attrs import op_axis, rank_of
from ...shared.manipulation import slice_index


def slice_(op):
    index = slice_index((0,) * rank_of(op), op.attr("axes"), op.attr("starts"), op.attr("ends"), op.attr("strides"))
    return lambda x: x[index]  # Python slicing clamps out-of-range bounds, as numpy does


def gather(op):
    """``np.take``; one integer index reads its row as a view (0.1 us against np.take's copy, 1.6 us: a loop
    body reads a row an iteration), with the same bounds and negative indexes."""
    axis = op_axis(op)
    lead = (slice(None),) * axis

    def run(x, index):
        if type(index) in _INTEGER_SCALARS or (type(index) is np.ndarray and not index.ndim
                                                and index.dtype.kind in "iu"):
            return x[lead + (index,)]
        return np.take(x, index, axis=axis)

    return run


_INTEGER_SCALARS = frozenset({int, *(np.dtype(c).type for c in np.typecodes["AllInteger"])})


KERNELS = {"slice": slice_, "gather": gather}
