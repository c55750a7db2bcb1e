"""How a convolution or pooling window sweeps its input, read from the op one way for every engine: the numpy
kernels build their taps and columns from it (``numpy/kernels/im2col.py``, ``pooling.py``), the xla lowerings
their windows and pads (``xla/lowerings/conv.py``), so both pad, stride and divide alike."""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from gradgen.program.ops.conv import POOL_ATTRS, pool_out_size, pool_paddings

__all__ = ["Pooling", "Sweep"]


class Sweep(NamedTuple):
    """A kernel swept over an input: its size, strides and dilations per spatial dim, and paddings (before, after)
    per dim in order (top, bottom, left, right in 2-D; a far side may include what only ceil-mode pooling
    reaches)."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads: tuple[int, ...]

    def out_size(self, size) -> tuple[int, ...]:
        """How many positions the kernel takes along each padded spatial dim."""
        return tuple((n + self.pads[2 * d] + self.pads[2 * d + 1] - self.dilations[d] * (k - 1) - 1)
                     // self.strides[d] + 1 for d, (n, k) in enumerate(zip(size, self.kernel)))

    def padded_size(self, size) -> tuple[int, ...]:
        return tuple(n + self.pads[2 * d] + self.pads[2 * d + 1] for d, n in enumerate(size))

    def padded(self) -> bool:
        return any(self.pads)

    def inner(self, size) -> tuple[slice, ...]:
        """The index of the unpadded input (spatial ``size``) inside the padded one."""
        return (slice(None), slice(None)) + tuple(slice(self.pads[2 * d], self.pads[2 * d] + n)
                                                  for d, n in enumerate(size))


class Pooling:
    """A pooling op's attrs (``program/ops/conv.POOL_ATTRS``, by name), and the sweep and divisor they imply for an
    input shape. ``Pooling.of(op)`` reads them from an op."""

    def __init__(self, *, pooling_type: str = "max", ksize, strides, paddings, exclusive: bool = True,
                 ceil_mode: bool, dilations):
        self.kind, self.ksize, self.strides, self.dilations = pooling_type, ksize, strides, dilations
        self.pads, self.exclusive = pool_paddings(paddings, len(ksize)), exclusive
        self.ceil_mode = ceil_mode

    @classmethod
    def of(cls, op) -> "Pooling":
        return cls(**{name: op.attr(name) for name in POOL_ATTRS})

    def sweep(self, size) -> Sweep:
        """The sweep over the input padded on the far sides by what the last (ceil mode) window reaches too."""
        pads = []
        for d, (n, k, s, dl) in enumerate(zip(size, self.ksize, self.strides, self.dilations)):
            span, before, after = (k - 1) * dl + 1, self.pads[2 * d], self.pads[2 * d + 1]
            out = pool_out_size(n, span, s, before, after, self.ceil_mode)
            pads += [before, max(after, (out - 1) * s + span - n - before)]
        return Sweep(tuple(self.ksize), tuple(self.strides), tuple(self.dilations), tuple(pads))

    def divisor(self, shape, out, dtype):
        """Per window: its in-bounds elements (exclusive) or its whole area (a numpy value from static shapes)."""
        if not self.exclusive:
            return dtype.type(math.prod(self.ksize))
        counts = np.ones((), dtype)
        for d, (n, k, s, dl, o) in enumerate(zip(shape[2:], self.ksize, self.strides, self.dilations, out)):
            reach = (np.arange(o) * s - self.pads[2 * d])[:, None] + np.arange(k) * dl
            counts = np.multiply.outer(counts, ((reach >= 0) & (reach < n)).sum(1))
        return counts.astype(dtype)
