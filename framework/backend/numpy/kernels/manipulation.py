"""The gather kernel kept beside its op's compute because it measures faster here (``FASTER``); the manipulation
ops' other kernels are derived from their ``compute`` (``derived``)."""
from __future__ import annotations

from ...shared.attrs import op_axis

__all__ = ["FASTER", "KERNELS"]


def gather(op):
    """numpy's indexing at Index along the axis, as the compute's ``take``, without its bounds check: numpy refuses
    an index out of bounds itself (an IndexError naming it, ``manipulation.positions``)."""
    lead = (slice(None),) * op_axis(op)
    return lambda x, index: x[lead + (index,)]


KERNELS = {"gather": gather}

FASTER = {
    "gather": "a row at a 0-d index took 0.8 us, the compute 30 (its bounds check over xp, 25 of them): a loop "
              "body reads a row an iteration ([100, 64] float32, one thread, this 2-core machine)",
}
"""op type -> why its kernel here stays beside the op's compute (``backend/derive.with_derived``)."""
