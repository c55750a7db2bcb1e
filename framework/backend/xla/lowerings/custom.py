"""Lowerings of ``call`` and ``custom_gradient`` (``backend/numpy/kernels/custom.py``): the op's (forward) block
traced in place, fed its params (bound to ``X``) and ``Input`` vars, as the numpy kernels feed it. Only the forward
body runs here; the gradient body runs in the ``call`` op the grad maker emits."""
from __future__ import annotations

from typing import Callable

from ..context import TraceContext

__all__ = ["LOWERINGS"]


def _inlined(params_attr: str, block_attr: str, outs_attr: str) -> Callable:
    """A lowering that traces the op's block in place, fed its params (bound to ``X``) and ``Input`` vars."""
    def factory(op, ctx: TraceContext) -> Callable:
        block, outs = ctx.sub_block(op, block_attr), op.attr(outs_attr)
        names = list(op.attr(params_attr)) + op.input("Input")
        single = len(op.output("Out")) == 1

        def fn(*values):
            got = ctx.trace_inline(block, dict(zip(names, values)), outs)
            return got[0] if single else tuple(got)

        return fn

    return factory


LOWERINGS = {
    "call": _inlined("params", "block", "outs"),
    "custom_gradient": _inlined("forward_params", "forward_block", "forward_outs"),
}
