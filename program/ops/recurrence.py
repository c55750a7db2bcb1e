"""The LSTM and GRU cells' math, written once for every engine (the numpy reference and the torch engine's
step-by-step kernels, on arrays and on dual numbers, and the xla lowering in ``lax.scan``): one step forward, its
gradient, a step of backpropagation through time under a sequence mask, and the weight gradients after the loop;
for the engines that loop in Python, the loops themselves (``run_forward``, ``run_backward``) and the gate
activations on arrays and duals (``gate_activation``).

One direction of one layer, time-major: X is ``[T, N, I]``, the state ``[N, H]``. Gates follow PyTorch's layout,
stacked along the rows of W ``[G*H, I]``, R ``[G*H, H]`` and the biases WB, RB ``[G*H]``: LSTM (G = 4) input,
forget, cell, output; GRU (G = 3) reset, update, new. The input projection of every step is one product before
the loop; the loop does the recurrent product and the gates; the backward pass collects each step's gate
gradients and does the weight gradients as products after its loop.

``ops`` is what the engine supplies: ``mm(a, b)``, the matrix product (numpy's ``@``, which takes dual numbers;
XLA's at its highest precision), ``concat(parts, axis)`` and ``where(cond, a, b)`` (b may be a Python number). A
gate activation gives ``apply(x)`` and ``back(d, y)``, d f'(x) written in the output y = f(x) (the trace keeps
outputs only; ``ACTIVATIONS`` has each one's value and slope over ``xp``). Everything else is the arrays' own
arithmetic, so a dual number runs the same lines. With one statement of the gradient, an engine's gradient is the
reference's, special values included: an infinite output gradient gives the infinities the reference's dh' (1 - z)
gives, where an automatic derivative of h' = n + z (h - n) forms dh' - dh' z, inf - inf.

With sequence lengths, a step at or past a sequence's end leaves its state unchanged and outputs zero (ONNX's
rule, PyTorch's packed sequences); ``m``, a step's ``[N, 1]`` mask, is 1 inside the sequence and 0 past its end.
The steps past the end are selected away, not multiplied by 0: whatever they compute (NaN from an infinite state
or weight) reaches no output and no gradient, and their X gets the gradient 0 (it is not read). Until 2026-12-02
a blend m s' + (1 - m) s made such a sequence's padding outputs, kept state and gradients NaN.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable, NamedTuple

from .dual import value
from .recurrent import ACTIVATIONS

__all__ = ["CELLS", "Cell", "backward_step", "forward_step", "gate_activation", "input_projection", "run_backward",
           "run_forward", "weight_gradients"]


def _gates(a, width: int, count: int) -> list:
    return [a[:, k * width:(k + 1) * width] for k in range(count)]


def _lstm_step(ops, xg, states, r, rb, _lbr, acts):
    h, c = states
    a = xg + ops.mm(h, r.T)
    if rb is not None:
        a = a + rb
    i, f, g, o = _gates(a, h.shape[1], 4)
    fa, ga, ha = acts
    i, f, g, o = fa.apply(i), fa.apply(f), ga.apply(g), fa.apply(o)
    c2 = f * c + i * g
    tc = ha.apply(c2)
    return [o * tc, c2], (h, c, i, f, g, o, tc, h)


def _lstm_back(ops, saved, dstates, r, _lbr, acts):
    """Gradients in the step's input projection, its recurrent pre-activation and its incoming states."""
    h, c, i, f, g, o, tc, _ = saved
    dh2, dc2 = dstates
    do = dh2 * tc
    fa, ga, ha = acts
    dc2 = dc2 + ha.back(dh2 * o, tc)
    da = ops.concat([fa.back(dc2 * g, i), fa.back(dc2 * c, f), ga.back(dc2 * i, g), fa.back(do, o)], 1)
    return da, da, [ops.mm(da, r), dc2 * f]


def _gru_step(ops, xg, states, r, rb, lbr, acts):
    (h,) = states
    width = h.shape[1]
    xr, xz, xn = _gates(xg, width, 3)
    if lbr:
        hr = ops.mm(h, r.T)
        if rb is not None:
            hr = hr + rb
        hr_r, hr_z, hn = _gates(hr, width, 3)
        hin = h
    else:
        hrz = ops.mm(h, r[:2 * width].T)
        if rb is not None:
            hrz = hrz + rb[:2 * width]
        hr_r, hr_z = _gates(hrz, width, 2)
    fa, ga = acts
    rg, z = fa.apply(xr + hr_r), fa.apply(xz + hr_z)
    if not lbr:
        hin = rg * h
        hn = ops.mm(hin, r[2 * width:].T)
        if rb is not None:
            hn = hn + rb[2 * width:]
    n = ga.apply(xn + rg * hn) if lbr else ga.apply(xn + hn)
    return [n + z * (h - n)], (h, rg, z, n, hn, hin)


def _gru_back(ops, saved, dstates, r, lbr, acts):
    h, rg, z, n, hn, _ = saved
    (dh2,) = dstates
    width = h.shape[1]
    fa, ga = acts
    dan = ga.back(dh2 * (1.0 - z), n)
    daz = fa.back(dh2 * (h - n), z)
    dh = dh2 * z
    if lbr:
        dar = fa.back(dan * hn, rg)
        dhr = ops.concat([dar, daz, dan * rg], 1)
        return ops.concat([dar, daz, dan], 1), dhr, [dh + ops.mm(dhr, r)]
    drh = ops.mm(dan, r[2 * width:])
    dar = fa.back(drh * h, rg)
    dhr = ops.concat([dar, daz, dan], 1)
    return dhr, dhr, [dh + drh * rg + ops.mm(dhr[:, :2 * width], r[:2 * width])]


class Cell(NamedTuple):
    """One recurrent cell: its gate count, its states (the first is the output h), one step forward
    (``step(ops, xg, states, r, rb, lbr, acts)`` -> (new states, what its gradient reads)) and that step's
    gradient (``back(ops, saved, dstates, r, lbr, acts)`` -> (d input projection, d recurrent pre-activation,
    d incoming states)). The last of ``saved`` is what R's last gate block multiplied."""

    gates: int
    states: tuple[str, ...]
    step: Callable
    back: Callable


CELLS = {"lstm": Cell(4, ("H", "C"), _lstm_step, _lstm_back), "gru": Cell(3, ("H",), _gru_step, _gru_back)}


def input_projection(ops, cell: Cell, x, w, wb):
    """Every step's input projection, X W^T + WB, as one product: ``[T, N, G*H]``."""
    steps, batch = x.shape[0], x.shape[1]
    xg = ops.mm(x.reshape(steps * batch, x.shape[2]), w.T)
    if wb is not None:
        xg = xg + wb
    return xg.reshape(steps, batch, w.shape[0])


def forward_step(ops, cell: Cell, xg_t, states: list, m, r, rb, lbr: bool, acts) -> tuple[list, Any, tuple]:
    """One step: (the states after it, its output, what its gradient reads). Past a sequence's end (``m`` 0) the
    states stay and the output is 0; ``m`` None: no lengths."""
    new, saved = cell.step(ops, xg_t, states, r, rb, lbr, acts)
    if m is None:
        return new, new[0], saved
    inside = m > 0
    new = [ops.where(inside, s2, s) for s2, s in zip(new, states)]
    return new, ops.where(inside, new[0], 0.0), saved


def backward_step(ops, cell: Cell, saved: tuple, dstates: list, dy_t, m, r, lbr: bool, acts) -> tuple:
    """One step of backpropagation through time, from the gradients in the states after the step (``dstates``)
    and in its output (``dy_t``, None when Y has none): (d input projection, d recurrent pre-activation, the
    gradients in the states before the step). Past a sequence's end the state's gradient passes the step by."""
    ds = list(dstates)
    if m is None:
        if dy_t is not None:
            ds[0] = ds[0] + dy_t
        return cell.back(ops, saved, ds, r, lbr, acts)
    inside = m > 0
    if dy_t is not None:
        ds[0] = ds[0] + ops.where(inside, dy_t, 0.0)
    dxg, dhr, before = cell.back(ops, saved, [ops.where(inside, d, 0.0) for d in ds], r, lbr, acts)
    return (ops.where(inside, dxg, 0.0), ops.where(inside, dhr, 0.0),
            [ops.where(inside, b, d) for b, d in zip(before, ds)])


def weight_gradients(ops, cell: Cell, x, w, r, dxg, dhr, h_prev, h_last, mask) -> tuple:
    """(dX, dW, dR, dWB, dRB) from every step's gate gradients (``dxg``, ``dhr``: ``[T*N, G*H]``) and the states
    R multiplied (``h_prev``, the step's incoming h, for all but the last gate block, ``h_last`` for that one:
    ``[T*N, H]``), as products after the loop; with lengths (``mask`` ``[T, N, 1]``) the steps past each end
    take no part (their states 0 in the products, X's gradient 0 there)."""
    cut = (cell.gates - 1) * r.shape[1]
    rows = x.shape[0] * x.shape[1]
    x2 = x.reshape(rows, x.shape[2])
    if mask is not None:
        inside = mask.reshape(rows, 1) > 0
        h_prev, h_last = ops.where(inside, h_prev, 0.0), ops.where(inside, h_last, 0.0)
    dr = ops.concat([ops.mm(dhr[:, :cut].T, h_prev), ops.mm(dhr[:, cut:].T, h_last)], 0)
    dx = ops.mm(dxg, w).reshape(x.shape)
    if mask is not None:
        dx = ops.where(mask > 0, dx, 0.0)
    return dx, ops.mm(dxg.T, x2), dr, dxg.sum(0), dhr.sum(0)


def gate_activation(name: str, alpha: float, beta: float, xp, dual) -> SimpleNamespace:
    """ONNX's activation ``name`` (``recurrent.ACTIVATIONS``) for an engine that runs the cells step by step, on
    arrays and dual numbers: ``apply(x)``, in x's dtype, a dual's tangent the slope written in the output times
    x's, and ``back(d, y)``, d f'(x) written in y (y may be a dual in the second-order backward; the piecewise
    slopes' masks read its plain value). ``xp`` is the engine's namespace, ``dual`` its ``dual.dual_ops``."""
    gate = ACTIVATIONS[name]
    slope_xp = SimpleNamespace(exp=dual.exp, sign=xp.sign, astype=xp.astype)

    def slope(y):
        return gate.slope(slope_xp, y, value(y), alpha, beta)

    apply = dual.lifted(lambda x: xp.astype(gate.value(xp, x, alpha, beta), x.dtype, copy=False), slope)
    return SimpleNamespace(apply=apply, back=lambda d, y: d * slope(y))


def run_forward(ops, cell: Cell, x, w, r, wb, rb, states0: list, mask, lbr: bool, acts) -> tuple:
    """The cell over every step of ``x`` in a loop (``mask`` ``[T, N, 1]`` or None): (Y, the final states, what
    each step's gradient reads). ``ops`` as ``dual.dual_ops`` gives (``mm``, ``concat``, ``where``, ``stack``,
    ``zeros``)."""
    steps, batch, width = x.shape[0], x.shape[1], r.shape[1]
    xg = input_projection(ops, cell, x, w, wb)
    states, ys, saved = states0, [], []
    for t in range(steps):
        states, y_t, keep = forward_step(ops, cell, xg[t], states, None if mask is None else mask[t], r, rb, lbr,
                                         acts)
        ys.append(y_t)
        saved.append(keep)
    y = ops.stack(ys) if steps else ops.zeros((0, batch, width), x)
    return y, states, saved


def run_backward(ops, cell: Cell, x, saved: list, w, r, dy, dstates: list, mask, lbr: bool, acts) -> tuple:
    """Gradients of <dy, Y> + <dstates, final states> in (X, W, R, WB, RB, the initial states), back through the
    steps ``run_forward`` kept (``dy`` None: Y has none)."""
    steps, batch, width = x.shape[0], x.shape[1], r.shape[1]
    dxgs, dhrs, ds = [None] * steps, [None] * steps, list(dstates)
    for t in reversed(range(steps)):
        dxgs[t], dhrs[t], ds = backward_step(ops, cell, saved[t], ds, None if dy is None else dy[t],
                                             None if mask is None else mask[t], r, lbr, acts)
    gates = r.shape[0]
    if not steps:
        return (ops.zeros(x.shape, x), ops.zeros(w.shape, x), ops.zeros(r.shape, x), ops.zeros((gates,), x),
                ops.zeros((gates,), x), ds)
    rows = steps * batch
    dxg, dhr = ops.stack(dxgs).reshape(rows, gates), ops.stack(dhrs).reshape(rows, gates)
    h_prev = ops.stack([s[0] for s in saved]).reshape(rows, width)
    h_last = ops.stack([s[-1] for s in saved]).reshape(rows, width)  # what R's last gate block multiplies
    return (*weight_gradients(ops, cell, x, w, r, dxg, dhr, h_prev, h_last, mask), ds)
