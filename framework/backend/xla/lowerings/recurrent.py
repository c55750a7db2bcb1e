"""Lowerings of the fused recurrences (``lstm``, ``gru``), their gradients (``*_grad``) and tangents (``*_jvp``).

The forward is the numpy recurrence (``backend/numpy/kernels/recurrence.py``) as one jax function: one input
projection GEMM for every step, then ``lax.scan`` over time doing the recurrent GEMM and the gates in the same
order of operations. Sequence lengths blend each step's new state with the old one by the step's 0/1 mask (steps
past a sequence's end output zero and keep the state); the reverse direction reverses each sequence in place (its
own length) before and after. ``*_grad`` is ``jax.vjp`` of that function (the numpy kernel recomputes the forward
and backpropagates through time: the same gradient); when the forward op is in the same trace, reading the same
values, the forward lowering takes the vjp itself and the grad op pulls back through its saved residuals rather
than running the recurrence a second time. And ``*_jvp`` is ``jax.jvp`` of (forward, vjp) -- what the
numpy kernel computes on dual numbers: the outputs' tangents and the gradients' tangents (the second order).

A sequence length outside [0, steps] is a run-time check, as the numpy kernel raises (XLA would clamp it).
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from jax import lax

from gradgen.program.ops.recurrent import ACTIVATIONS, GATES, OUTPUTS, PARAMS, activations, grad_slot, tangent_slot

from ..xp import XP

__all__ = ["LOWERINGS"]

_HIGHEST = lax.Precision.HIGHEST


def _mm(a, b):
    return jnp.matmul(a, b, precision=_HIGHEST)


def _gates(a, width: int, count: int) -> list:
    return [a[:, k * width:(k + 1) * width] for k in range(count)]


def _activation(name: str, alpha: float, beta: float) -> Callable:
    """ONNX's activation ``name`` as a jax function, from ``ops.recurrent.ACTIVATIONS``; jax differentiates it."""
    value = ACTIVATIONS[name].value
    return lambda x: value(XP, x, alpha, beta).astype(x.dtype)


# -- one step of each cell: (input projection of the step, states) -> new states ---------------------------------
def _lstm_step(xg, states, r, rb, _lbr, acts):
    h, c = states
    a = xg + _mm(h, r.T)
    if rb is not None:
        a = a + rb
    i, f, g, o = _gates(a, h.shape[1], 4)
    fa, ga, ha = acts
    i, f, g, o = fa(i), fa(f), ga(g), fa(o)
    c2 = f * c + i * g
    return [o * ha(c2), c2]


def _gru_step(xg, states, r, rb, lbr, acts):
    (h,) = states
    width = h.shape[1]
    xr, xz, xn = _gates(xg, width, 3)
    if lbr:
        hr = _mm(h, r.T)
        if rb is not None:
            hr = hr + rb
        hr_r, hr_z, hn = _gates(hr, width, 3)
    else:
        hrz = _mm(h, r[:2 * width].T)
        if rb is not None:
            hrz = hrz + rb[:2 * width]
        hr_r, hr_z = _gates(hrz, width, 2)
    fa, ga = acts
    rg, z = fa(xr + hr_r), fa(xz + hr_z)
    if lbr:
        n = ga(xn + rg * hn)
    else:
        hn = _mm(rg * h, r[2 * width:].T)
        if rb is not None:
            hn = hn + rb[2 * width:]
        n = ga(xn + hn)
    return [n + z * (h - n)]


_STEPS = {"lstm": _lstm_step, "gru": _gru_step}
_STATES = {"lstm": ("H0", "C0"), "gru": ("H0",)}


def _sequence(cell: str, lbr: bool, acts: list, x, w, r, wb, rb, states0: list, mask):
    """Y and the final states of one forward direction over ``x`` (``mask`` ``[T, N, 1]`` or None)."""
    steps, batch, width = x.shape[0], x.shape[1], r.shape[1]
    xg = _mm(x.reshape(steps * batch, x.shape[2]), w.T)
    if wb is not None:
        xg = xg + wb
    xg = xg.reshape(steps, batch, GATES[cell] * width)
    step = _STEPS[cell]

    def body(states, inputs):
        xg_t, m = inputs
        new = step(xg_t, states, r, rb, lbr, acts)
        if m is None:
            return new, new[0]
        new = [m * s2 + (1.0 - m) * s for s2, s in zip(new, states)]
        return new, m * new[0]

    states, y = lax.scan(body, list(states0), (xg, mask), length=steps)
    return y, states


def _reverse_index(lens, steps: int, batch: int):
    """The index reversing each sequence in place (its own first ``lens[n]`` steps, all when lens is None)."""
    t = jnp.arange(steps)[:, None]
    b = jnp.arange(batch)[None, :]
    if lens is None:
        return jnp.broadcast_to(steps - 1 - t, (steps, batch)), b
    return jnp.where(t < lens[None, :], lens[None, :] - 1 - t, t), b


class _Direction:
    """One op's attrs and present slots; ``function(lens)`` is its forward as a function of its present
    differentiable inputs (PARAMS order) -> (Y, final states...)."""

    def __init__(self, op, cell: str):
        self.cell, self.reverse = cell, bool(op.attr("is_reverse"))
        self.lbr = bool(op.attr("linear_before_reset")) if cell == "gru" else False
        self.acts = [_activation(*a) for a in activations(cell, op.attrs)]
        self.params = [p for p in PARAMS[cell] if op.input(p)]
        self.dtype = jnp.dtype(op.block.var(op.input("X")[0]).dtype)

    def lengths(self, ctx, lens, steps: int):
        """The lengths as int64, checked to lie in [0, steps] as the numpy kernel checks them."""
        lens = lens.astype(jnp.int64)
        ctx.check(jnp.all((lens >= 0) & (lens <= steps)),
                  f"sequence lengths must be in [0, {steps}] (the time axis)")
        return lens

    def function(self, lens) -> Callable:
        def forward(*params):
            vals = dict(zip(self.params, params))
            x, r = vals["X"], vals["R"]
            steps, batch = x.shape[0], x.shape[1]
            zeros = jnp.zeros((batch, r.shape[1]), self.dtype)
            states0 = [vals.get(s, zeros) for s in _STATES[self.cell]]
            mask = None
            if lens is not None:
                mask = (jnp.arange(steps)[:, None] < lens[None, :]).astype(self.dtype)[:, :, None]
                x = jnp.where(mask > 0, x, 0.0)  # the steps past a sequence's end are not read (numpy's ``bind``)
            order = _reverse_index(lens, steps, batch) if self.reverse else None
            flip = (lambda a: a[order]) if order is not None else (lambda a: a)
            y, states = _sequence(self.cell, self.lbr, self.acts, flip(x), vals["W"], r, vals.get("WB"), vals.get("RB"),
                                  states0, mask)
            return (flip(y), *states)

        return forward


def _bind(op, d: _Direction, ctx, slots: list[str], arrays) -> tuple[dict, Callable]:
    """The op's arrays by slot (only present ones), and its forward with the lengths bound."""
    vals = dict(zip([s for s in slots if op.input(s)], arrays))
    lens = vals.get("SeqLens")
    if lens is not None:
        lens = d.lengths(ctx, lens, vals["X"].shape[0])
    return vals, d.function(lens)


def _cast(values, dtype):
    out = tuple(v.astype(dtype) for v in values)
    return out[0] if len(out) == 1 else out


def _inputs_key(op, cell: str) -> tuple:
    """What a forward op and its gradient op share: the cell and the names of the forward's inputs."""
    return (cell, *(tuple(op.input(s)) for s in (*PARAMS[cell], "SeqLens")))


def _has_gradient_op(op, cell: str) -> bool:
    """Whether ``op``'s block also differentiates it (a ``*_grad`` op reading the same inputs)."""
    key = _inputs_key(op, cell)
    return any(o.type == f"{cell}_grad" and _inputs_key(o, cell) == key for o in op.block.ops)


def _forward(cell: str):
    def lowering(op, ctx):
        d = _Direction(op, cell)
        slots = [*PARAMS[cell], "SeqLens"]
        keep_pullback = _has_gradient_op(op, cell)

        def run(*arrays):
            vals, forward = _bind(op, d, ctx, slots, arrays)
            params = tuple(vals[p] for p in d.params)
            if not keep_pullback:
                return _cast(forward(*params), d.dtype)
            outs, pullback = jax.vjp(forward, *params)  # the same forward, its residuals kept for the grad op
            ctx.pullbacks[_inputs_key(op, cell)] = (arrays, pullback)
            return _cast(outs, d.dtype)

        return run

    return lowering


def _grad(cell: str):
    def lowering(op, ctx):
        d = _Direction(op, cell)
        slots = [*PARAMS[cell], "SeqLens", *map(grad_slot, OUTPUTS[cell])]
        present = len([s for s in (*PARAMS[cell], "SeqLens") if op.input(s)])
        named = [bool(op.output(grad_slot(p))) for p in d.params]  # the gradients the op has outputs for

        def run(*arrays):
            vals, forward = _bind(op, d, ctx, slots, arrays)
            at, pullback = ctx.pullbacks.get(_inputs_key(op, cell), ((), None))
            if pullback is None or len(at) != present or any(a is not b for a, b in zip(at, arrays)):
                outs, pullback = jax.vjp(forward, *(vals[p] for p in d.params))  # run the forward again
            else:
                outs = jax.eval_shape(forward, *(vals[p] for p in d.params))
            grads = pullback(_given(cell, vals, outs, grad_slot))
            return _cast([g for g, keep in zip(grads, named) if keep], d.dtype)

        return run

    return lowering


def _given(cell: str, vals: dict, like, name: Callable) -> tuple:
    """``vals[name(o)]`` for each output o of the cell, zeros shaped like ``like``'s where absent."""
    return tuple(vals[name(o)] if name(o) in vals else jnp.zeros(v.shape, v.dtype)
                 for o, v in zip(OUTPUTS[cell], like))


def _jvp(cell: str):
    def lowering(op, ctx):
        d = _Direction(op, cell)
        params, outs = PARAMS[cell], OUTPUTS[cell]
        slots = [*params, "SeqLens", *map(tangent_slot, params), *map(grad_slot, outs),
                 *(tangent_slot(grad_slot(o)) for o in outs)]
        out_tangents = [bool(op.output(tangent_slot(o))) for o in outs]
        grad_tangents = [bool(op.output(tangent_slot(grad_slot(p)))) for p in d.params]

        def run(*arrays):
            vals, forward = _bind(op, d, ctx, slots, arrays)
            primals = tuple(vals[p] for p in d.params)
            dots = tuple(vals.get(tangent_slot(p), jnp.zeros_like(vals[p])) for p in d.params)
            like = jax.eval_shape(forward, *primals)
            cots = _given(cell, vals, like, grad_slot)
            cot_dots = _given(cell, vals, like, lambda o: tangent_slot(grad_slot(o)))

            def outputs_and_gradients(primals, cots):
                outs, pullback = jax.vjp(forward, *primals)
                return outs, pullback(cots)

            _, (out_dots, grad_dots) = jax.jvp(outputs_and_gradients, (primals, cots), (dots, cot_dots))
            results = [t for t, keep in zip(out_dots, out_tangents) if keep]
            results += [t for t, keep in zip(grad_dots, grad_tangents) if keep]
            return _cast(results, d.dtype)

        return run

    return lowering


LOWERINGS = {**{c: _forward(c) for c in PARAMS}, **{f"{c}_grad": _grad(c) for c in PARAMS},
             **{f"{c}_jvp": _jvp(c) for c in PARAMS}}
