"""Kernels of the fused grad ops (see ``program/ops/grad_ops.py``) that do not state their math over ``xp``
(the others are derived: ``derived``), and the one that does but is measured faster here (``FASTER``)."""
from __future__ import annotations

import numpy as np

from ...shared.manipulation import slice_index
from .indexing import scatter_rows


def relu_grad(op):
    """``where(Out > 0, dOut, dOut * 0)`` (the op's compute) as ``dOut * (Out > 0)``: the same numbers, NaN
    from an infinite or NaN dOut at an inactive unit and -0.0 from a negative one included."""
    dtype = np.dtype(op.block.var(op.output("X@GRAD")[0]).dtype)
    return lambda y, dout: np.multiply(dout, y > 0, dtype=dtype)


def slice_grad(op):
    axes, starts, ends, strides = op.attr("axes"), op.attr("starts"), op.attr("ends"), op.attr("strides")

    def run(x, dout):
        dx = np.zeros(x.shape, dtype=dout.dtype)
        dx[slice_index(x.shape, axes, starts, ends, strides)] = dout
        return dx

    return run


def gather_grad(op):
    axis = op.attr("axis")
    return lambda x, index, dout: scatter_rows(np.zeros(x.shape, dtype=dout.dtype), index, dout, axis, add=True)


KERNELS = {
    "relu_grad": relu_grad, "slice_grad": slice_grad, "gather_grad": gather_grad,
}

FASTER = {
    "relu_grad": "np.where over a data-dependent mask runs ~4 ns an element (branchy), the product with the "
                 "mask ~0.45: ResNet's relu_grad steps took 35.8 ms of a 200 ms step derived, 4.3 by product "
                 "(Executor(profile=True) on the anchors' ResNet workload, design_docs/performance.md)",
}
"""op type -> why its kernel here stays beside the op's compute (``backend/derive.with_derived``)."""
