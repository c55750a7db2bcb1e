"""Kernels of ``call`` and ``custom_gradient``: run one sub-block as a function of the op's inputs."""
from __future__ import annotations

from .signature import SubBlock


def call_blocks(op) -> dict[str, SubBlock]:
    """The block is fed its parameters (bound to ``X``) and the op's ``Input`` vars."""
    return {"body": SubBlock(op.attr("block"), op.attr("params") + op.input("Input"), op.attr("outs"))}


def custom_gradient_blocks(op) -> dict[str, SubBlock]:
    """Only the forward body runs here; the gradient body runs in the ``call`` op the grad maker emits."""
    return {"body": SubBlock(op.attr("forward_block"), op.attr("forward_params") + op.input("Input"),
                             op.attr("forward_outs"))}


def _run_body(op, blocks):
    params = op.attr("params") if op.type == "call" else op.attr("forward_params")
    names = list(params) + op.input("Input")
    body, single = blocks["body"], len(op.output("Out")) == 1

    def run(*values):
        outs = body(dict(zip(names, values)))
        return outs[0] if single else tuple(outs)

    return run


KERNELS = {"call": _run_body, "custom_gradient": _run_body}
SUBBLOCKS = {"call": call_blocks, "custom_gradient": custom_gradient_blocks}

__all__ = ["KERNELS", "SUBBLOCKS"]
