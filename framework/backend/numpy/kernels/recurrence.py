"""The LSTM and GRU recurrences in numpy, forward and backward through time, for plain arrays and for dual
numbers: the cells' math is ``program/ops/recurrence.py``'s (written once for every engine), run here step by step
with numpy's product (``@``) and ``concat``, which take duals.

One direction of one layer, time-major: X is ``[T, N, I]``, the state ``[N, H]`` (the gate layout:
``recurrence``). The gates' activations are data (``Activation``, by ``activation(name, alpha, beta)``): ONNX's
set, each written once over ``xp`` with its slope in ``ops.recurrent.ACTIVATIONS``.

``Dual`` (value, tangent) runs the same code forward-mode: the forward pass on duals gives the Jacobian of
the outputs applied to the inputs' tangents, and the backward pass on duals gives the tangent of the
gradients, i.e. the Hessian of ``<dOutputs, Outputs>`` applied to the tangents (plus the Jacobian's
transpose applied to the dOutputs' tangents). Those are the second-order gradients the ``*_jvp`` ops return.

With sequence lengths, steps at or past a sequence's length leave its state unchanged and output zero
(ONNX's rule); ``mask[t]`` is 1.0 where step t is inside the sequence. The reverse direction walks each
sequence from its own last step back to its first (``reverse_index``).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np

from gradgen.program.ops.dual import Dual, value
from gradgen.program.ops.recurrence import Cell, backward_step, forward_step, input_projection, weight_gradients
from gradgen.program.ops.recurrent import ACTIVATIONS

from ..xp import XP

__all__ = ["Dual", "Trace", "value", "tangent", "Activation", "activation", "concat", "stack", "where",
           "sequence_mask", "reverse_index", "forward", "backward"]


def tangent(a):
    """The tangent of a dual; zeros for a plain array."""
    return a.d if isinstance(a, Dual) else np.zeros_like(a)


def _lift(fn: Callable, slope: Callable):
    """The elementwise ``fn`` on arrays and duals; ``slope(y)`` is fn' written in fn's result y."""
    def apply(a):
        if isinstance(a, Dual):
            y = apply(a.v)
            return Dual(y, a.d * slope(y))
        return fn(a)
    return apply


class _DualXP:
    """What a gate's slope (``ops.recurrent.GateActivation.slope``) reads of ``xp``: numpy's functions, with
    ``exp`` also taking duals (the slope runs on duals in the second-order backward)."""

    exp = staticmethod(_lift(np.exp, lambda e: e))
    sign = staticmethod(np.sign)
    astype = staticmethod(np.astype)  # (of a mask, made from a plain value)


@dataclass(frozen=True)
class Activation:
    """A gate's activation: ``apply(x)`` on arrays and duals, and ``back(d, y)``: ``d * f'(x)`` written in the
    output ``y = f(x)`` (the trace keeps outputs only). ``y`` may be a dual in the second-order backward, so
    ``back`` uses dual arithmetic only; masks read ``value(y)`` (constants: piecewise slopes have no slope)."""

    apply: Callable
    back: Callable


def activation(name: str, alpha: float, beta: float) -> Activation:
    """ONNX's activation ``name`` (lowercase) with its alpha and beta, from ``ops.recurrent.ACTIVATIONS``."""
    gate = ACTIVATIONS[name]

    def slope(y):
        return gate.slope(_DualXP, y, value(y), alpha, beta)

    def fn(x):
        return np.asarray(gate.value(XP, x, alpha, beta)).astype(x.dtype, copy=False)

    return Activation(_lift(fn, slope), lambda d, y: d * slope(y))


def concat(parts: list, axis: int):
    """np.concatenate of arrays or duals (a dual if any part is)."""
    if any(isinstance(p, Dual) for p in parts):
        return Dual(np.concatenate([value(p) for p in parts], axis), np.concatenate([tangent(p) for p in parts], axis))
    return np.concatenate(parts, axis)


def stack(parts: list):
    """np.stack along a new axis 0 of arrays or duals (parts is not empty)."""
    if any(isinstance(p, Dual) for p in parts):
        return Dual(np.stack([value(p) for p in parts]), np.stack([tangent(p) for p in parts]))
    return np.stack(parts)


def where(cond, a, b):
    """np.where of arrays or duals (a dual if either is; ``b`` may be a number)."""
    if isinstance(a, Dual) or isinstance(b, Dual):
        return Dual(np.where(cond, value(a), value(b)), np.where(cond, tangent(a), tangent(b)))
    return np.where(cond, a, b)


_OPS = SimpleNamespace(mm=lambda a, b: a @ b, concat=concat, where=where)
"""What the shared cell math (``program/ops/recurrence``) asks of the engine: numpy's product, concat and select,
on arrays and duals."""


# -- whole sequences ----------------------------------------------------------------------------------------------
def sequence_mask(lens: np.ndarray, steps: int, dtype) -> np.ndarray:
    """``[T, N, 1]``: 1.0 where step t is inside sequence n (t < lens[n])."""
    if lens.size and (lens.min() < 0 or lens.max() > steps):
        raise ValueError(f"sequence lengths must be in [0, {steps}] (the time axis), got {lens.tolist()}")
    return (np.arange(steps)[:, None] < lens[None, :]).astype(dtype)[:, :, None]


def reverse_index(lens: np.ndarray | None, steps: int, batch: int):
    """The index that reverses each sequence in place (its own first ``lens[n]`` steps); its own inverse."""
    t = np.arange(steps)[:, None]
    if lens is None:
        return (steps - 1 - t) * np.ones((1, batch), dtype=int), np.arange(batch)[None, :]
    return np.where(t < lens[None, :], lens[None, :] - 1 - t, t), np.arange(batch)[None, :]


@dataclass
class Trace:
    """What the forward pass keeps for the backward pass."""

    x: Any
    saved: list
    states0: list


def forward(cell: Cell, x, w, r, wb, rb, states0: list, mask, lbr: bool, acts: list[Activation]):
    """Run the cell over the steps of ``x`` with its activations ``acts``; ``(Y, final states, Trace)``."""
    steps, batch, width = x.shape[0], x.shape[1], r.shape[1]
    xg = input_projection(_OPS, cell, x, w, wb)
    states, ys, saved = states0, [], []
    for t in range(steps):
        states, y_t, keep = forward_step(_OPS, cell, xg[t], states, None if mask is None else mask[t], r, rb, lbr,
                                         acts)
        ys.append(y_t)
        saved.append(keep)
    y = stack(ys) if steps else np.zeros((0, batch, width), value(x).dtype)
    return y, states, Trace(x, saved, states0)


def backward(cell: Cell, trace: Trace, w, r, dy, dstates: list, mask, lbr: bool, acts: list[Activation]):
    """Gradients of ``<dy, Y> + <dstates, final states>`` in (X, W, R, WB, RB, initial states)."""
    x = trace.x
    steps, batch, width = x.shape[0], x.shape[1], r.shape[1]
    dxgs, dhrs = [None] * steps, [None] * steps
    ds = list(dstates)
    for t in reversed(range(steps)):
        dxgs[t], dhrs[t], ds = backward_step(_OPS, cell, trace.saved[t], ds, None if dy is None else dy[t],
                                             None if mask is None else mask[t], r, lbr, acts)
    if not steps:
        zero = lambda a: np.zeros_like(value(a))  # noqa: E731
        return zero(x), zero(w), zero(r), np.zeros(r.shape[0], value(x).dtype), np.zeros(r.shape[0], value(x).dtype), ds
    rows = steps * batch
    dxg, dhr = stack(dxgs).reshape(rows, r.shape[0]), stack(dhrs).reshape(rows, r.shape[0])
    h_prev = stack([s[0] for s in trace.saved]).reshape(rows, width)
    h_last = stack([s[-1] for s in trace.saved]).reshape(rows, width)  # what R's last gate block multiplies
    return (*weight_gradients(_OPS, cell, x, w, r, dxg, dhr, h_prev, h_last, mask), ds)
