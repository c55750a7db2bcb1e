"""``gelu`` and ``gelu_grad`` in the torch engine on ATen's ``gelu`` and ``gelu_backward`` (``FASTER`` says why they
stay beside the ops' compute), the compute where they would part from it."""
from __future__ import annotations

from typing import Callable

import torch

from gradgen.program.ops import OP_SCHEMAS

from ..xp import XP
from .derived import derived_kernel
from .finite import all_finite, fused

__all__ = ["FASTER", "KERNELS"]

_aten = torch.ops.aten


def _on_aten(op_type: str, by_aten: Callable) -> Callable:
    """A kernel factory for ``op_type``: ``by_aten`` (with the op's inputs, approximate="none": the exact gelu, the
    compute's formula) on float32 and float64 tensors whose values are all finite; the op's compute for float16,
    empty tensors and values that are not finite."""

    def factory(op):
        computed = derived_kernel(OP_SCHEMAS[op_type], XP)(op)

        def run(x, *rest):
            if fused(x) and all_finite(x, *rest):
                return by_aten(x, *rest)
            return computed(x, *rest)

        return run

    return factory


KERNELS = {"gelu": _on_aten("gelu", _aten.gelu),
           "gelu_grad": _on_aten("gelu_grad", lambda x, dout: _aten.gelu_backward(dout, x))}

FASTER = {
    "gelu": "ATen's gelu with the finiteness check took 1.73 ms on the transformer's [16, 128, 1024] float32 (two "
            "threads; the call alone 1.39), the op's formula (erf, then three products, each a pass) 5.8 in the "
            "transformer's step and 21 alone",
    "gelu_grad": "ATen's gelu_backward with the finiteness check took 1.75 ms on the transformer's [16, 128, 1024] "
                 "float32 (two threads; the call alone 1.4), the op's formulas (erf and exp in separate passes) "
                 "6.5-10",
}
"""op type -> why its kernel here stays beside the op's compute (``backend/derive.with_derived``)."""
