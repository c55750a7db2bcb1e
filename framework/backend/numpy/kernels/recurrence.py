"""The LSTM and GRU recurrences in numpy, forward and backward through time, written once for plain arrays and
for dual numbers.

One direction of one layer, time-major: X is ``[T, N, I]``, the state ``[N, H]``. Gates follow PyTorch's
layout, stacked along the rows of W ``[G*H, I]``, R ``[G*H, H]`` and the biases WB, RB ``[G*H]``: LSTM
(G = 4) input, forget, cell, output; GRU (G = 3) reset, update, new. The input projection of every step is
one GEMM before the loop; the loop does the recurrent GEMM and the gates; the backward pass collects each
step's gate gradients and does the weight gradients as GEMMs after its loop. The gates' activations are data
(``Activation``, by ``activation(name, alpha, beta)``): ONNX's set, each written once over ``xp`` with its slope
in ``ops.recurrent.ACTIVATIONS``, the xla lowering's too.

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
from typing import Any, Callable

import numpy as np

from gradgen.program.ops.recurrent import ACTIVATIONS

from ..xp import XP

__all__ = ["Dual", "Cell", "CELLS", "Trace", "value", "tangent", "Activation", "activation",
           "concat", "stack", "sequence_mask", "reverse_index", "forward", "backward"]


class Dual:
    """A value with a tangent; arithmetic, matmul, indexing and the gate functions carry the tangent along."""

    __array_ufunc__ = None  # numpy hands ``array op dual`` to the dual's reflected method
    __slots__ = ("v", "d")

    def __init__(self, v, d):
        self.v, self.d = v, d

    @property
    def shape(self):
        return self.v.shape

    @property
    def T(self):  # noqa: N802 -- numpy's name
        return Dual(self.v.T, self.d.T)

    def __add__(self, o):
        return Dual(self.v + o.v, self.d + o.d) if isinstance(o, Dual) else Dual(self.v + o, self.d)

    __radd__ = __add__

    def __neg__(self):
        return Dual(-self.v, -self.d)

    def __sub__(self, o):
        return self + (-o)

    def __rsub__(self, o):
        return (-self) + o

    def __mul__(self, o):
        if isinstance(o, Dual):
            return Dual(self.v * o.v, self.d * o.v + self.v * o.d)
        return Dual(self.v * o, self.d * o)

    __rmul__ = __mul__

    def __matmul__(self, o):
        if isinstance(o, Dual):
            return Dual(self.v @ o.v, self.d @ o.v + self.v @ o.d)
        return Dual(self.v @ o, self.d @ o)

    def __rmatmul__(self, o):
        return Dual(o @ self.v, o @ self.d)

    def __getitem__(self, key):
        return Dual(self.v[key], self.d[key])

    def sum(self, axis):
        return Dual(self.v.sum(axis), self.d.sum(axis))

    def reshape(self, *shape):
        return Dual(self.v.reshape(*shape), self.d.reshape(*shape))


def value(a):
    """The value of a dual (a plain array is its own value)."""
    return a.v if isinstance(a, Dual) else a


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


def _gates(a, h: int, g: int) -> list:
    return [a[:, k * h:(k + 1) * h] for k in range(g)]


# -- the cells: one step forward, and its gradient ----------------------------------------------------------------
def _lstm_step(xg, states, r, rb, _lbr, acts):
    h, c = states
    a = xg + h @ r.T
    if rb is not None:
        a = a + rb
    width = h.shape[1]
    i, f, g, o = _gates(a, width, 4)
    fa, ga, ha = acts
    i, f, g, o = fa.apply(i), fa.apply(f), ga.apply(g), fa.apply(o)
    c2 = f * c + i * g
    tc = ha.apply(c2)
    return [o * tc, c2], (h, c, i, f, g, o, tc, h)


def _lstm_back(saved, dstates, r, _lbr, acts):
    """Gradients in the step's input projection, its recurrent pre-activation and its incoming states."""
    h, c, i, f, g, o, tc, _ = saved
    dh2, dc2 = dstates
    do = dh2 * tc
    fa, ga, ha = acts
    dc2 = dc2 + ha.back(dh2 * o, tc)
    da = concat([fa.back(dc2 * g, i), fa.back(dc2 * c, f), ga.back(dc2 * i, g), fa.back(do, o)], 1)
    return da, da, [da @ r, dc2 * f]


def _gru_step(xg, states, r, rb, lbr, acts):
    (h,) = states
    width = h.shape[1]
    xr, xz, xn = _gates(xg, width, 3)
    if lbr:
        hr = h @ r.T
        if rb is not None:
            hr = hr + rb
        hr_r, hr_z, hn = _gates(hr, width, 3)
        hin = h
    else:
        hrz = h @ r[:2 * width].T
        if rb is not None:
            hrz = hrz + rb[:2 * width]
        hr_r, hr_z = _gates(hrz, width, 2)
    fa, ga = acts
    rg, z = fa.apply(xr + hr_r), fa.apply(xz + hr_z)
    if not lbr:
        hin = rg * h
        hn = hin @ r[2 * width:].T
        if rb is not None:
            hn = hn + rb[2 * width:]
    n = ga.apply(xn + rg * hn) if lbr else ga.apply(xn + hn)
    return [n + z * (h - n)], (h, rg, z, n, hn, hin)


def _gru_back(saved, dstates, r, lbr, acts):
    h, rg, z, n, hn, _ = saved
    (dh2,) = dstates
    width = h.shape[1]
    fa, ga = acts
    dan = ga.back(dh2 * (1.0 - z), n)
    daz = fa.back(dh2 * (h - n), z)
    dh = dh2 * z
    if lbr:
        dar = fa.back(dan * hn, rg)
        dhr = concat([dar, daz, dan * rg], 1)
        return concat([dar, daz, dan], 1), dhr, [dh + dhr @ r]
    drh = dan @ r[2 * width:]
    dar = fa.back(drh * h, rg)
    dhr = concat([dar, daz, dan], 1)
    return dhr, dhr, [dh + drh * rg + dhr[:, :2 * width] @ r[:2 * width]]


@dataclass(frozen=True)
class Cell:
    """One recurrent cell: its gate count, its states (the first is the output h) and its step and gradient."""

    gates: int
    states: tuple[str, ...]
    step: Callable
    back: Callable


CELLS = {"lstm": Cell(4, ("H", "C"), _lstm_step, _lstm_back), "gru": Cell(3, ("H",), _gru_step, _gru_back)}


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
    xg = x.reshape(steps * batch, x.shape[2]) @ w.T
    if wb is not None:
        xg = xg + wb
    xg = xg.reshape(steps, batch, cell.gates * width)
    states, ys, saved = states0, [], []
    for t in range(steps):
        new, keep = cell.step(xg[t], states, r, rb, lbr, acts)
        if mask is not None:
            m = mask[t]
            new = [m * s2 + (1.0 - m) * s for s2, s in zip(new, states)]
            ys.append(m * new[0])
        else:
            ys.append(new[0])
        states = new
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
        m = None if mask is None else mask[t]
        if dy is not None:
            ds[0] = ds[0] + (dy[t] if m is None else m * dy[t])
        if m is not None:
            kept = [(1.0 - m) * d for d in ds]
            ds = [m * d for d in ds]
        dxgs[t], dhrs[t], ds = cell.back(trace.saved[t], ds, r, lbr, acts)
        if mask is not None:
            ds = [d + k for d, k in zip(ds, kept)]
    if not steps:
        zero = lambda a: np.zeros_like(value(a))  # noqa: E731
        return zero(x), zero(w), zero(r), np.zeros(r.shape[0], value(x).dtype), np.zeros(r.shape[0], value(x).dtype), ds
    rows = steps * batch
    dxg, dhr = stack(dxgs).reshape(rows, r.shape[0]), stack(dhrs).reshape(rows, r.shape[0])
    x2 = x.reshape(rows, x.shape[2])
    h_prev = stack([s[0] for s in trace.saved]).reshape(rows, width)
    h_last = stack([s[-1] for s in trace.saved]).reshape(rows, width)  # what R's last gate block multiplies
    cut = (cell.gates - 1) * width
    dr = concat([dhr[:, :cut].T @ h_prev, dhr[:, cut:].T @ h_last], 0)
    return ((dxg @ w).reshape(x.shape), dxg.T @ x2, dr, dxg.sum(0), dhr.sum(0), ds)
