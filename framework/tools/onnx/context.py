"""What a lowering function sees: one gradgen op, the ONNX names of its inputs, and a graph to add nodes to.

A lowering is a plain function ``lower(ctx)`` in a family table (``lower_*.py``). It reads
``ctx.x(slot)`` / ``ctx.var(slot)`` / ``ctx.attr(name)``, adds nodes with ``ctx.g``, and binds every
output with ``ctx.emit`` or ``ctx.set``. Control-flow lowerings also build subgraphs with
``ctx.subgraph``.
"""
from __future__ import annotations

from collections import ChainMap
from typing import Callable, Sequence

import numpy as np

from .graph import GraphBuilder

__all__ = ["Lowering", "LowerFn"]


class Lowering:
    """One op being lowered: its inputs as ONNX value names, and where its outputs get bound."""

    def __init__(self, op, g: GraphBuilder, env: ChainMap, lower_block: Callable):
        self.op, self.g, self.env = op, g, env
        self._lower_block = lower_block

    # -- reading the op ------------------------------------------------------------------------------------
    def attr(self, name: str):
        return self.op.attr(name)

    def has(self, slot: str) -> bool:
        return bool(self.op.inputs.get(slot))

    def xs(self, slot: str) -> list[str]:
        return [self.env[n] for n in self.op.input(slot)]

    def x(self, slot: str = "X", k: int = 0) -> str:
        return self.xs(slot)[k]

    def var(self, slot: str = "X", k: int = 0):
        """The gradgen Variable of input ``slot`` (its static shape and dtype)."""
        return self.op.block.var(self.op.input(slot)[k])

    def out_var(self, slot: str = "Out", k: int = 0):
        return self.op.block.var(self.op.output(slot)[k])

    def dtype(self, slot: str = "X") -> str:
        return self.var(slot).dtype

    def rank(self, slot: str = "X") -> int:
        return len(self.var(slot).shape)

    # -- binding outputs -----------------------------------------------------------------------------------
    def name(self, slot: str = "Out", k: int = 0) -> str:
        """A fresh ONNX name for output ``slot[k]``, after its var name."""
        return self.g.names.fresh(self.op.output(slot)[k])

    def set(self, value: str, slot: str = "Out", k: int = 0) -> None:
        """Bind output ``slot[k]`` to an ONNX value (later readers of the var read it)."""
        self.env[self.op.output(slot)[k]] = value

    def emit(self, op_type: str, inputs: Sequence[str], slot: str = "Out", k: int = 0, **attrs) -> str:
        """Add the node that computes output ``slot[k]`` and bind it."""
        value = self.g.node(op_type, inputs, out=self.name(slot, k), **attrs)
        self.set(value, slot, k)
        return value

    def finish(self, value: str, slot: str = "Out", k: int = 0) -> str:
        """Bind output ``slot[k]`` to ``value`` through an Identity named after the var (readable graphs)."""
        return self.emit("Identity", [value], slot, k)

    # -- small helpers many lowerings share ----------------------------------------------------------------
    def scalar(self, value: float, dtype: str) -> str:
        return self.g.const(np.asarray(value, dtype=dtype), hint="scalar")

    def to_scalar(self, value: str) -> str:
        """A one-element value (a learning rate of shape [1], a [1] condition) as a rank-0 tensor."""
        return self.g.node("Reshape", [value, self.g.ints([])])

    # -- sub-blocks ----------------------------------------------------------------------------------------
    def lower_block(self, block_idx: int, g: GraphBuilder, env: ChainMap) -> None:
        """Lower every op of sub-block ``block_idx`` into ``g``, reading and binding vars in ``env``."""
        self._lower_block(self.op.block.program.block(block_idx), g, env)

    def subgraph(self) -> tuple[GraphBuilder, ChainMap]:
        """A fresh graph builder (same name allocator) and a child env that sees this op's env."""
        return GraphBuilder(self.g.names), self.env.new_child()


LowerFn = Callable[[Lowering], None]
