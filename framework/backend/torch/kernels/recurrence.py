"""The LSTM and GRU step by step on torch, with the cells' math written once (``program/ops/recurrence.py``, the
numpy reference's and the xla lowering's own): the kernels of the recurrences ATen's fused calls do not run as the
reference does (``recurrent``: an LSTM in float64, with sequence lengths or other activations; ONNX's
GRU without ``linear_before_reset``) and of the GRU's gradient where an output gradient is not finite (autograd's
derivative of ATen's cell forms dh' - dh' z, inf - inf, where the reference has dh' (1 - z)).

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

from gradgen.program.ops.recurrence import CELLS, backward_step, forward_step, input_projection, weight_gradients
from gradgen.program.ops.recurrent import ACTIVATIONS, OUTPUTS, PARAMS, activations, grad_slot

from ..xp import XP

__all__ = ["stepwise_forward", "stepwise_gradient"]


def _product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.asarray(np.matmul(a.numpy(), b.numpy())))


_OPS = SimpleNamespace(mm=_product, concat=lambda parts, axis: torch.cat(parts, axis), where=torch.where)
"""What the shared cell math asks of the engine: numpy's product (the reference's), torch's concatenation and
select."""


def _activation(name: str, alpha: float, beta: float) -> SimpleNamespace:
    """ONNX's activation ``name`` (``ops.recurrent.ACTIVATIONS``) over torch: ``apply(x)`` and ``back(d, y)``."""
    gate = ACTIVATIONS[name]
    return SimpleNamespace(apply=lambda x: gate.value(XP, x, alpha, beta).to(x.dtype),
                           back=lambda d, y: d * gate.slope(XP, y, y, alpha, beta))


class _Direction:
    """One op's cell, direction and activations, and its slots present."""

    def __init__(self, op, cell: str, slots: list[str]):
        self.cell, self.reverse = CELLS[cell], bool(op.attr("is_reverse"))
        self.lbr = bool(op.attr("linear_before_reset")) if cell == "gru" else False
        self.acts = [_activation(*a) for a in activations(cell, op.attrs)]
        self.slots, self.initial, self.outputs = slots, [f"{s}0" for s in CELLS[cell].states], OUTPUTS[cell]
        self.params = [p for p in PARAMS[cell] if p in slots]

    def bind(self, tensors) -> tuple[dict, torch.Tensor | None, Callable]:
        """The run's tensors by slot (X past each sequence's end 0, absent initial states zeros), the ``[T, N, 1]``
        mask (None without lengths) and ``flip``, which reverses each sequence in place for the reverse direction
        (its own inverse)."""
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
            vals["X"] = torch.where(mask > 0, x, torch.zeros((), dtype=x.dtype))
        if self.reverse:
            t = torch.arange(steps)[:, None]
            order = (steps - 1 - t).expand(steps, batch) if lens is None else torch.where(t < lens, lens - 1 - t, t)
        for s in self.initial:
            if vals.get(s) is None:
                vals[s] = x.new_zeros((batch, r.shape[1]))

        def flip(a):
            return a if order is None else a.gather(0, order[:, :, None].expand(-1, -1, a.shape[2]))

        return vals, mask, flip

    def forward(self, vals: dict, mask, flip) -> tuple[torch.Tensor, list, list]:
        """(Y, the final states, every step's values for the gradient)."""
        x, r = flip(vals["X"]), vals["R"]
        xg = input_projection(_OPS, self.cell, x, vals["W"], vals.get("WB"))
        states, ys, saved = [vals[s] for s in self.initial], [], []
        for t in range(x.shape[0]):
            states, y_t, keep = forward_step(_OPS, self.cell, xg[t], states, None if mask is None else mask[t], r,
                                             vals.get("RB"), self.lbr, self.acts)
            ys.append(y_t)
            saved.append(keep)
        y = torch.stack(ys) if ys else x.new_zeros((0, x.shape[1], r.shape[1]))
        return flip(y), states, saved

    def gradients(self, vals: dict, mask, flip, saved: list, dy, dstates: list) -> dict:
        """The gradients of <dy, Y> + <dstates, final states> by param slot."""
        x, w, r = flip(vals["X"]), vals["W"], vals["R"]
        steps, batch, width = x.shape[0], x.shape[1], r.shape[1]
        dy = None if dy is None else flip(dy)
        dxgs, dhrs, ds = [None] * steps, [None] * steps, list(dstates)
        for t in reversed(range(steps)):
            dxgs[t], dhrs[t], ds = backward_step(_OPS, self.cell, saved[t], ds, None if dy is None else dy[t],
                                                 None if mask is None else mask[t], r, self.lbr, self.acts)
        rows, gates = steps * batch, r.shape[0]
        if steps:
            dxg, dhr = torch.stack(dxgs).reshape(rows, gates), torch.stack(dhrs).reshape(rows, gates)
            h_prev = torch.stack([s[0] for s in saved]).reshape(rows, width)
            h_last = torch.stack([s[-1] for s in saved]).reshape(rows, width)
            dx, dw, dr, dwb, drb = weight_gradients(_OPS, self.cell, x, w, r, dxg, dhr, h_prev, h_last, mask)
        else:
            dx, dw, dr, dwb, drb = (torch.zeros_like(x), torch.zeros_like(w), torch.zeros_like(r),
                                    r.new_zeros(gates), r.new_zeros(gates))
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
