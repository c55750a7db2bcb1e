"""Lowerings of lstm and gru to ONNX's ``LSTM`` and ``GRU`` (one direction each).

The inverse of ``import_recurrent``: the gate blocks go back to ONNX's order (by a ``Gather`` of rows), the
weights, biases and initial states get ONNX's leading direction axis, and the outputs lose it. Activations other
than the defaults are written with their alpha and beta explicit.
"""
from __future__ import annotations

import numpy as np

from onnx import TensorProto

from .context import Lowering
from gradgen.program.ops.recurrent import activations, default_activations

from .import_recurrent import ONNX_GATE_BLOCKS, onnx_activation_attrs

__all__ = ["LOWERINGS"]


def onnx_rows(cell: str, hidden: int) -> np.ndarray:
    """The gradgen rows that make ONNX's gate-ordered rows."""
    inverse = np.argsort(ONNX_GATE_BLOCKS[cell])
    return np.concatenate([np.arange(b * hidden, (b + 1) * hidden) for b in inverse]).astype(np.int64)


def _recurrent(cell: str):
    def lower(ctx: Lowering) -> None:
        g, hidden = ctx.g, ctx.var("R").shape[1]
        rows = g.const(onnx_rows(cell, hidden), hint="gate_rows")
        lead = lambda v: g.node("Unsqueeze", [v, g.ints([0])])  # noqa: E731
        reordered = lambda v: lead(g.node("Gather", [v, rows], axis=0))  # noqa: E731
        inputs = [ctx.x("X"), reordered(ctx.x("W")), reordered(ctx.x("R"))]
        if ctx.has("WB") or ctx.has("RB"):
            zeros = lambda: g.const(np.zeros(ctx.var("R").shape[0], ctx.dtype("X")))  # noqa: E731
            biases = [g.node("Gather", [ctx.x(s) if ctx.has(s) else zeros(), rows], axis=0) for s in ("WB", "RB")]
            inputs.append(lead(g.node("Concat", biases, axis=0)))
        else:
            inputs.append("")
        inputs.append(g.node("Cast", [ctx.x("SeqLens")], to=TensorProto.INT32) if ctx.has("SeqLens") else "")
        states = ("H0", "C0") if cell == "lstm" else ("H0",)
        inputs += [lead(ctx.x(s)) if ctx.has(s) else "" for s in states]
        while inputs[-1] == "":
            inputs.pop()
        extra = {"linear_before_reset": int(ctx.attr("linear_before_reset"))} if cell == "gru" else {}
        acts = activations(cell, {a: ctx.attr(a) for a in ("activations", "activation_alpha", "activation_beta")})
        if [n for n, _, _ in acts] != default_activations(cell):
            extra.update(onnx_activation_attrs(acts))
        outs = [g.names.fresh(f"{cell}_{s.lower()}") for s in ("Y", "H", "C")[:1 + len(states)]]
        g.node_multi(cell.upper(), inputs, outs, hidden_size=hidden,
                     direction="reverse" if ctx.attr("is_reverse") else "forward", **extra)
        for k, (slot, value) in enumerate(zip(("Y", "H", "C"), outs)):
            ctx.emit("Squeeze", [value, g.ints([1 if k == 0 else 0])], slot=slot)
    return lower


LOWERINGS = {"lstm": _recurrent("lstm"), "gru": _recurrent("gru")}
