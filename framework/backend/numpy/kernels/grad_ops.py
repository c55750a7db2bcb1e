"""The fused grad op kernels kept beside their ops' math because they measure faster here (``FASTER``); the grad
ops' other kernels are derived from their ``compute`` (``derived``)."""
from __future__ import annotations

import numpy as np

from gradgen.program.ops.manipulation import positions, slice_index

from ...shared.attrs import op_axis
from ..xp import XP
from .indexing import scatter_rows


def relu_grad(op):
    """``where(Out > 0, dOut, dOut * 0)`` (the op's compute) as ``dOut * (Out > 0)``: the same numbers, NaN
    from an infinite or NaN dOut at an inactive unit and -0.0 from a negative one included."""
    dtype = np.dtype(op.block.var(op.output("X@GRAD")[0]).dtype)
    return lambda y, dout: np.multiply(dout, y > 0, dtype=dtype)


def slice_grad(op):
    """Out@GRAD written into zeros shaped like X where the slice took it (numpy's setitem, no copy between)."""
    attrs = {name: op.attr(name) for name in ("axes", "starts", "ends", "strides")}

    def run(x, dout):
        dx, index = np.zeros(x.shape, dout.dtype), [slice(None)] * x.ndim
        for a, (at, backwards) in slice_index(x.shape, **attrs).items():
            index[a], dout = at, np.flip(dout, a) if backwards else dout
        dx[tuple(index)] = dout
        return dx

    return run


def gather_grad(op):
    """Out@GRAD's rows added at Index (``np.add.at``, repeats in order) into zeros shaped like X, in place: the
    compute's ``xp.scatter_rows`` adds into a copy of its zeros."""
    axis = op_axis(op)

    def run(x, index, dout):
        at = positions(XP, index, x.shape[axis], "gather_grad", axis)
        return scatter_rows(np.zeros(x.shape, dout.dtype), at, dout, axis, add=True)

    return run


KERNELS = {"relu_grad": relu_grad, "slice_grad": slice_grad, "gather_grad": gather_grad}

FASTER = {
    "relu_grad": "np.where over a data-dependent mask runs ~4 ns an element (branchy), the product with the "
                 "mask ~0.45: ResNet's relu_grad steps took 35.8 ms of a 200 ms step derived, 4.3 by product "
                 "(Executor(profile=True) on the anchors' ResNet workload, design_docs/performance.md)",
    "slice_grad": "a strided slice's gradient written by setitem took 113 us on a [32, 128, 64] float32 X (stride 2 "
                  "along 128), the compute's rows spread by concat and reshape 1228; a [4, 8] one 1.8 against 12.5",
    "gather_grad": "np.add.at into fresh zeros took 3.3 ms for 256 rows of a [30000, 128] float32 table, the "
                   "compute 8.5 (xp.scatter_rows copies its zeros first); [1000, 64]: 0.27 against 0.58",
}
"""op type -> why its kernel here stays beside the op's compute (``backend/derive.with_derived``)."""
