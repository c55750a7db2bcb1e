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

from gradgen.program.ops.dual import Dual, value
from gradgen.program.ops.recurrence import CELLS, backward_step, forward_step, input_projection, weight_gradients
from gradgen.program.ops.recurrent import ACTIVATIONS, OUTPUTS, PARAMS, activations, grad_slot, tangent_slot

from ..xp import XP

__all__ = ["stepwise_forward", "stepwise_gradient", "stepwise_tangent"]


def _tangent(a):
    """The tangent of a dual; zeros for a plain tensor."""
    return a.d if isinstance(a, Dual) else torch.zeros_like(a)


def _linear(fn):
    """``fn``, a linear map of a list of tensors (a concatenation, a stack), on a list that may hold duals: their
    values and their tangents mapped alike."""
    def apply(parts, *args):
        if any(isinstance(p, Dual) for p in parts):
            return Dual(fn([value(p) for p in parts], *args), fn([_tangent(p) for p in parts], *args))
        return fn(parts, *args)
    return apply


_concat, _stack = _linear(torch.cat), _linear(torch.stack)


def _flipped(a, order):
    """``a`` (time-major) with each sequence reordered by ``order`` ``[T, N]`` (None: as it is), tensor or dual."""
    if order is None:
        return a
    if isinstance(a, Dual):
        return Dual(_flipped(a.v, order), _flipped(a.d, order))
    return a.gather(0, order[:, :, None].expand(-1, -1, a.shape[2]))


def _product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.asarray(np.matmul(a.numpy(), b.numpy())))


def _mm(a, b):
    """The product on numpy's (the reference's), of tensors or duals, in the reference dual's order of terms."""
    if isinstance(a, Dual):
        if isinstance(b, Dual):
            return Dual(_product(a.v, b.v), _product(a.d, b.v) + _product(a.v, b.d))
        return Dual(_product(a.v, b), _product(a.d, b))
    if isinstance(b, Dual):
        return Dual(_product(a, b.v), _product(a, b.d))
    return _product(a, b)


def _where(cond, a, b):
    """torch.where of tensors or duals (``b`` may be a number: its tangent 0)."""
    if isinstance(a, Dual) or isinstance(b, Dual):
        return Dual(torch.where(cond, value(a), value(b)),
                    torch.where(cond, _tangent(a), _tangent(b) if isinstance(b, torch.Tensor | Dual) else 0.0))
    return torch.where(cond, a, b)


_OPS = SimpleNamespace(mm=_mm, concat=_concat, where=_where)
"""What the shared cell math asks of the engine: numpy's product (the reference's), torch's concatenation and
select, each on tensors and duals."""


def _exp(x):
    if isinstance(x, Dual):
        e = torch.exp(x.v)
        return Dual(e, x.d * e)
    return torch.exp(x)


_SLOPE_XP = SimpleNamespace(exp=_exp, sign=XP.sign, astype=XP.astype)
"""What a gate's slope reads of ``xp`` (``ops.recurrent.GateActivation.slope``): torch's functions, ``exp`` also on
duals (a slope runs on duals in the second-order backward; its masks read the plain value)."""


def _activation(name: str, alpha: float, beta: float) -> SimpleNamespace:
    """ONNX's activation ``name`` (``ops.recurrent.ACTIVATIONS``) over torch: ``apply(x)``, on a dual its tangent
    the slope written in the output times x's (the reference's), and ``back(d, y)``, d f'(x) written in y."""
    gate = ACTIVATIONS[name]

    def slope(y):
        return gate.slope(_SLOPE_XP, y, value(y), alpha, beta)

    def apply(x):
        if isinstance(x, Dual):
            y = apply(x.v)
            return Dual(y, x.d * slope(y))
        return gate.value(XP, x, alpha, beta).to(x.dtype)

    return SimpleNamespace(apply=apply, back=lambda d, y: d * slope(y))


class _Direction:
    """One op's cell, direction and activations, and its slots present."""

    def __init__(self, op, cell: str, slots: list[str]):
        self.cell, self.reverse = CELLS[cell], bool(op.attr("is_reverse"))
        self.lbr = bool(op.attr("linear_before_reset")) if cell == "gru" else False
        self.acts = [_activation(*a) for a in activations(cell, op.attrs)]
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
        y = _stack(ys) if ys else value(x).new_zeros((0, x.shape[1], r.shape[1]))
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
            dxg, dhr = _stack(dxgs).reshape(rows, gates), _stack(dhrs).reshape(rows, gates)
            h_prev = _stack([s[0] for s in saved]).reshape(rows, width)
            h_last = _stack([s[-1] for s in saved]).reshape(rows, width)
            dx, dw, dr, dwb, drb = weight_gradients(_OPS, self.cell, x, w, r, dxg, dhr, h_prev, h_last, mask)
        else:
            dx, dw, dr = (torch.zeros_like(value(a)) for a in (x, w, r))
            dwb, drb = value(r).new_zeros(gates), value(r).new_zeros(gates)
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
        results = [_tangent(v) for v, keep in zip([y, *states], out_tangents) if keep]
        if any(grad_tangents):
            dy, *ds = (dual(vals, grad_slot(o), value(v)) for o, v in zip(outs, [y, *states]))
            grads = d.gradients(duals, mask, flip, saved, dy, ds)
            results += [_tangent(grads[p]) for p, keep in zip(d.params, grad_tangents) if keep]
        return _result(results)

    return run
