"""``gelu`` and ``gelu_grad`` in the torch engine on ATen's ``gelu`` and ``gelu_backward`` (``FASTER`` says why
each stays beside the op's compute), the compute where they would part from it."""
from __future__ import annotations

import torch

from gradgen.program.ops import OP_SCHEMAS

from ..xp import XP
from .derived import derived_kernel
from .finite import all_finite, fused

__all__ = ["FASTER", "KERNELS"]

_aten = torch.ops.aten


def gelu(op):
    """ATen's ``gelu`` with approximate="none": x Phi(x) with Phi from erf, the compute's formula in one pass; the
    compute for float16, empty tensors and values that are not finite (the formula gives NaN at -inf)."""
    computed = derived_kernel(OP_SCHEMAS["gelu"], XP)(op)

    def run(x):
        if fused(x) and all_finite(x):
            return _aten.gelu(x)
        return computed(x)

    return run


def gelu_grad(op):
    """ATen's ``gelu_backward`` with approximate="none": dOut (Phi(x) + x phi(x)) with Phi from erf, the compute's
    formula; the compute for float16, empty tensors and values that are not finite."""
    computed = derived_kernel(OP_SCHEMAS["gelu_grad"], XP)(op)

    def run(x, dout):
        if fused(x) and all_finite(x, dout):
            return _aten.gelu_backward(dout, x)
        return computed(x, dout)

    return run


KERNELS = {"gelu": gelu, "gelu_grad": gelu_grad}

FASTER = {
    "gelu": "ATen's gelu took 0.85 ms a call on the transformer's [16, 128, 1024] float32 (two threads), the op's "
            "formula (erf, then three products and a sum, each a pass) 2.3 ms in erf alone",
    "gelu_grad": "ATen's gelu_backward with the finiteness check took 1.75 ms on the transformer's [16, 128, 1024] "
                 "float32 (two threads; the call alone 1.4), the op's formulas (erf and exp in separate passes) "
                 "6.5-10",
}
"""op type -> why its kernel here stays beside the op's compute (``backend/derive.with_derived``)."""
