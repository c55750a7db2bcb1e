"""What a tangent rule sees during the forward-mode pass (``grad_makers.tangent_rules.TangentContext``)."""
from __future__ import annotations

from typing import Any, Sequence

from gradgen.grad_makers import RuleError
from gradgen.program.schema import TensorType
from gradgen.program.subblocks import external_reads


class RuleContext:
    """One op and the tangents of its inputs (a name, or None for a symbolic zero)."""

    def __init__(self, forward_pass, op, tangents: dict[str, str]):
        self._pass = forward_pass
        self._op = op
        self._tangents = tangents

    @property
    def type(self) -> str:
        return self._op.type

    @property
    def attrs(self) -> dict[str, Any]:
        return self._op.attrs

    def attr(self, name: str) -> Any:
        return self._op.attrs[name]

    def input(self, slot: str) -> str:
        names = self._op.inputs.get(slot)
        if not names:
            raise RuleError(f"the rule reads input slot '{slot}', which holds no var")
        return names[0]

    def inputs(self, slot: str) -> list[str]:
        return self._op.inputs.get(slot, [])

    def input_slots(self) -> dict[str, list[str]]:
        return self._op.inputs

    def output(self, slot: str) -> str:
        names = self._op.outputs.get(slot)
        if not names:
            raise RuleError(f"the rule reads output slot '{slot}', which holds no var")
        return names[0]

    def outputs(self, slot: str) -> list[str]:
        return self._op.outputs.get(slot, [])

    def var_type(self, name: str) -> TensorType:
        var = self._op.block.var(name)
        return TensorType(var.shape, var.dtype)

    def shape(self, name: str) -> tuple[int, ...]:
        return self._op.block.var(name).shape

    def dtype(self, name: str) -> str:
        return self._op.block.var(name).dtype

    # -- tangents --------------------------------------------------------------
    def tangent(self, slot: str) -> str | None:
        names = self._op.inputs.get(slot)
        return self._tangents.get(names[0]) if names else None

    def tangents(self, slot: str) -> list[str | None]:
        return [self._tangents.get(n) for n in self._op.inputs.get(slot, [])]

    def tangent_block(self, block: int, results: Sequence[str], seeds: Sequence[tuple[str, str]],
                      carried: Sequence[str] = (), keep: Sequence[str] = ()) -> tuple[int, list[str], list[str]]:
        """A copy of sub-block ``block`` with forward mode run inside (see ``ForwardPass.tangent_block``)."""
        return self._pass.tangent_block(self._op, block, results, seeds, carried, keep)

    def transposed_block(self, block: int, results: Sequence[str], directions: Sequence[str | None],
                         wrt: Sequence[str]) -> tuple[int, list[str]]:
        """A copy of block ``block`` that ends in the gradient of ``sum_k <results[k], directions[k]>`` with
        respect to its vars ``wrt``: for a body linear in ``wrt``, its transpose applied to the directions
        (see ``ForwardPass.transposed_block``)."""
        return self._pass.transposed_block(self._op, block, results, directions, wrt)

    def reads(self, blocks: Sequence[int]) -> list[str]:
        """The outer vars the ops of ``blocks`` read: the ``Input`` slot of a control-flow op that owns them."""
        program = self._op.block.program
        return external_reads([program.block(b) for b in blocks])


__all__ = ["RuleContext"]
