"""The LSTM and GRU step by step on torch, with the cells' math written once (``program/ops/recurrence.py``, the
numpy reference's and the xla lowering's own): the kernels of the recurrences ATen's fused calls do not run as the
reference does (``recurrent``: an LSTM in float64, with sequence lengths or other activations; ONNX's
GRU without ``linear_before_reset``) and of the GRU's gradient where an output gradient is not finite (autograd's
derivative of ATen's cell forms dh' - dh' z, inf - inf, where the reference has dh' (1 - z)), and the tangent ops
(``lstm_jvp``, ``gru_jvp``): the forward and backward run on dual numbers (``program/ops/dual.py``), as the
reference's do.

A loop of ATen calls a step, forward and back, the gradient recomputing the forward (as the reference's does); the
products are numpy's (the reference's: MKL's parted from IEEE on special values, ``linalg``). The lengths, the
reverse direction and the padding are the reference's rules (``numpy/kernels/recurrent.py``): steps past a
sequence's end keep its state and output zero, X there is not read, the reverse direction walks each sequence from
its own end.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Callable

import numpy as np
import torch

from gradgen.program.ops.dual import Dual, dual_ops, value
from gradgen.program.ops.recurrence import CELLS, gate_activation, run_backward, run_forward
from gradgen.program.ops.recurrent import OUTPUTS, PARAMS, activations, grad_slot, tangent_slot

from ..xp import XP

__all__ = ["stepwise_forward", "stepwise_gradient", "stepwise_tangent"]


def _product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.asarray(np.matmul(a.numpy(), b.numpy())))


_DUAL = dual_ops(SimpleNamespace(zeros_like=torch.zeros_like, zeros=lambda shape, like: like.new_zeros(shape),
                                 concat=torch.cat, stack=torch.stack, where=torch.where, matmul=_product,
                                 exp=torch.exp))
"""What the shared cell math and its loops ask of the engine, on tensors and duals: numpy's product (the
reference's), torch's concatenation, stack and select, zeros."""


def _flipped(a, order):
    """``a`` (time-major) with each sequence reordered by ``order`` ``[T, N]`` (None: as it is), tensor or dual."""
    if order is None:
        return a
    if isinstance(a, Dual):
        return Dual(_flipped(a.v, order), _flipped(a.d, order))
    return a.gather(0, order[:, :, None].expand(-1, -1, a.shape[2]))


class _Direction:
    """One op's cell, direction and activations, and its slots present."""

    def __init__(self, op, cell: str, slots: list[str]):
        self.cell, self.reverse = CELLS[cell], bool(op.attr("is_reverse"))
        self.lbr = bool(op.attr("linear_before_reset")) if cell == "gru" else False
        self.acts = [gate_activation(*a, XP, _DUAL) for a in activations(cell, op.attrs)]
        self.slots, self.initial, self.outputs = slots, [f"{s}0" for s in CELLS[cell].states], OUTPUTS[cell]
        self.params = [p for p in PARAMS[cell] if p in slots]

    def bind(self, tensors) -> tuple[dict, torch.Tensor | None, Callable]:
        """The run's tensors by slot (X and its tangent past each sequence's end 0, absent initial states zeros),
        the ``[T, N, 1]`` mask (None without lengths) and ``flip``, which reverses each sequence in place for the
        reverse direction (its own inverse), on tensors and duals."""
        vals = dict(zip(self.slots, tensors))
        x, r = vals["X"], vals["R"]
        steps, batch = x.shape[0], x.shape[1]
        mask, order = None, None
        lens = vals.get("SeqLens")
        if lens is not None:
            lens = lens.to(torch.int64)
            if lens.numel() and (int(lens.min()) < 0 or int(lens.max()) > steps):
                raise ValueError(f"sequence lengths must be in [0, {steps}] (the time axis), got {lens.tolist()}")
            mask = (torch.arange(steps)[:, None] < lens[None, :]).to(x.dtype)[:, :, None]
            for slot in ("X", tangent_slot("X")):
                if slot in vals:
                    vals[slot] = torch.where(mask > 0, vals[slot], torch.zeros((), dtype=x.dtype))
        if self.reverse:
            t = torch.arange(steps)[:, None]
            order = (steps - 1 - t).expand(steps, batch) if lens is None else torch.where(t < lens, lens - 1 - t, t)
        for s in self.initial:
            if vals.get(s) is None:
                vals[s] = x.new_zeros((batch, r.shape[1]))

        return vals, mask, lambda a: _flipped(a, order)

    def forward(self, vals: dict, mask, flip) -> tuple:
        """(Y, the final states, every step's values for the gradient)."""
        y, states, saved = run_forward(_DUAL, self.cell, flip(vals["X"]), vals["W"], vals["R"], vals.get("WB"),
                                       vals.get("RB"), [vals[s] for s in self.initial], mask, self.lbr, self.acts)
        return flip(y), states, saved

    def gradients(self, vals: dict, mask, flip, saved: list, dy, dstates: list) -> dict:
        """The gradients of <dy, Y> + <dstates, final states> by param slot."""
        dx, dw, dr, dwb, drb, ds = run_backward(_DUAL, self.cell, flip(vals["X"]), saved, vals["W"], vals["R"],
                                                None if dy is None else flip(dy), dstates, mask, self.lbr, self.acts)
        return {"X": flip(dx), "W": dw, "R": dr, "WB": dwb, "RB": drb, **dict(zip(self.initial, ds))}


def _result(values: list):
    return values[0] if len(values) == 1 else tuple(values)


def stepwise_forward(op, cell: str) -> Callable:
    """The kernel of a ``lstm``/``gru`` op, step by step."""
    d = _Direction(op, cell, [s for s in (*PARAMS[cell], "SeqLens") if op.input(s)])

    def run(*tensors):
        vals, mask, flip = d.bind(tensors)
        y, states, _ = d.forward(vals, mask, flip)
        return _result([y, *states])

    return run


def stepwise_gradient(op, cell: str) -> Callable:
    """The kernel of a ``lstm_grad``/``gru_grad`` op, step by step: the forward again, then back through it."""
    slots = [s for s in (*PARAMS[cell], "SeqLens", *map(grad_slot, OUTPUTS[cell])) if op.input(s)]
    d = _Direction(op, cell, slots)
    wanted = [p for p in d.params if op.output(grad_slot(p))]

    def run(*tensors):
        vals, mask, flip = d.bind(tensors)
        _, _, saved = d.forward(vals, mask, flip)
        dstates = [vals.get(grad_slot(s)) for s in d.outputs[1:]]
        dstates = [torch.zeros_like(vals[s0]) if g is None else g for g, s0 in zip(dstates, d.initial)]
        grads = d.gradients(vals, mask, flip, saved, vals.get(grad_slot("Y")), dstates)
        return _result([grads[p] for p in wanted])

    return run


def stepwise_tangent(op, cell: str) -> Callable:
    """The kernel of a ``lstm_jvp``/``gru_jvp`` op: the forward on dual numbers gives the outputs' tangents, and the
    backward on duals (the output gradients' tangents among them) the gradients' tangents, as the reference's."""
    params, outs = PARAMS[cell], OUTPUTS[cell]
    slots = [s for s in (*params, "SeqLens", *map(tangent_slot, params), *map(grad_slot, outs),
                         *(tangent_slot(grad_slot(o)) for o in outs)) if op.input(s)]
    d = _Direction(op, cell, slots)
    out_tangents = [bool(op.output(tangent_slot(o))) for o in outs]
    grad_tangents = [bool(op.output(tangent_slot(grad_slot(p)))) for p in d.params]

    def dual(vals: dict, slot: str, like) -> Dual:
        base = vals[slot] if slot in vals else torch.zeros_like(like)
        return Dual(base, vals.get(tangent_slot(slot), torch.zeros_like(base)))

    def run(*tensors):
        vals, mask, flip = d.bind(tensors)
        duals = {**vals, **{p: dual(vals, p, None) for p in params if p in vals}}
        y, states, saved = d.forward(duals, mask, flip)
        results = [_DUAL.tangent(v) for v, keep in zip([y, *states], out_tangents) if keep]
        if any(grad_tangents):
            dy, *ds = (dual(vals, grad_slot(o), value(v)) for o, v in zip(outs, [y, *states]))
            grads = d.gradients(duals, mask, flip, saved, dy, ds)
            results += [_DUAL.tangent(grads[p]) for p, keep in zip(d.params, grad_tangents) if keep]
        return _result(results)

    return run
