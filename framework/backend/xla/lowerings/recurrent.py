"""Lowerings of the fused recurrences (``lstm``, ``gru``), their gradients (``*_grad``) and tangents (``*_jvp``).

The cells' math is the reference's, written once (``program/ops/recurrence.py``): the forward is one input
projection GEMM for every step, then ``lax.scan`` over time running the shared step (the recurrent GEMM and the
gates, in the reference's order of operations); ``*_grad`` is the shared backpropagation through time, a reverse
``lax.scan`` of the shared step gradient over what the forward scan kept, then the weight gradients as GEMMs, so
the gradient is the reference's, special values included (an automatic derivative of the step parts from it on
infinite output gradients: inf - inf where the reference has inf). When the forward op is in the same trace,
reading the same values, it keeps its steps' values for the grad op rather than the grad op running the recurrence
a second time. ``*_jvp`` is ``jax.jvp`` of (forward, backward): what the reference computes on dual numbers, the
outputs' tangents and the gradients' tangents (the second order).

Sequence lengths select, at each step, the new state inside a sequence and the old one past its end (where the
output is zero; ``recurrence``), and X past each end is not read (taken as 0); the reverse direction reverses each
sequence in place (its own length) before and after. A sequence length outside [0, steps] is a run-time check, as
the numpy kernel raises (XLA would clamp it).
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from gradgen.program.ops.recurrence import CELLS, Cell, backward_step, forward_step, input_projection, weight_gradients
from gradgen.program.ops.recurrence_kernels import reordered, reverse_order, sequence_mask
from gradgen.program.ops.recurrent import ACTIVATIONS, OUTPUTS, PARAMS, activations, grad_slot, tangent_slot

from ..xp import XP

__all__ = ["LOWERINGS"]

_HIGHEST = lax.Precision.HIGHEST

_OPS = SimpleNamespace(mm=lambda a, b: jnp.matmul(a, b, precision=_HIGHEST),
                       concat=lambda parts, axis: jnp.concatenate(parts, axis), where=jnp.where)
"""What the shared cell math asks of the engine (``recurrence``): XLA's product at its highest precision."""


def _activation(name: str, alpha: float, beta: float) -> SimpleNamespace:
    """ONNX's activation ``name`` from ``ops.recurrent.ACTIVATIONS``: ``apply(x)``, whose tangent is the
    reference's (the slope written in the output, times x's tangent: a sigmoid of a huge argument has tangent 0
    there, where JAX's derivative of its formula gave NaN), and ``back(d, y)``, d f'(x) written in y = f(x) (the
    piecewise slopes' masks read y's value, which has no tangent)."""
    gate = ACTIVATIONS[name]

    def slope(y):
        return gate.slope(XP, y, lax.stop_gradient(y), alpha, beta)

    @jax.custom_jvp
    def apply(x):
        return gate.value(XP, x, alpha, beta).astype(x.dtype)

    @apply.defjvp
    def _apply_tangent(primals, tangents):
        y = apply(primals[0])
        return y, tangents[0] * slope(y)

    return SimpleNamespace(apply=apply, back=lambda d, y: d * slope(y))


def _sequence(c: Cell, lbr: bool, acts: list, x, w, r, wb, rb, states0: list, mask, keep: bool):
    """Y, the final states and (``keep``) every step's values for the gradient (else None), of one forward
    direction over ``x`` (``mask`` ``[T, N, 1]`` or None)."""
    xg = input_projection(_OPS, c, x, w, wb)

    def body(states, inputs):
        xg_t, m = inputs
        new, y_t, saved = forward_step(_OPS, c, xg_t, states, m, r, rb, lbr, acts)
        return new, (y_t, saved if keep else None)

    states, (y, saved) = lax.scan(body, list(states0), (xg, mask), length=x.shape[0])
    return y, states, saved


def _backward(c: Cell, lbr: bool, acts: list, x, w, r, saved, dy, dstates: list, mask) -> tuple:
    """(dX, dW, dR, dWB, dRB, the initial states' gradients) of one direction: the reference's backpropagation
    through time over the steps' kept values, ``dy`` None where Y has no gradient."""
    steps, batch, width = x.shape[0], x.shape[1], r.shape[1]

    def body(ds, inputs):
        saved_t, dy_t, m = inputs
        dxg, dhr, ds = backward_step(_OPS, c, saved_t, ds, dy_t, m, r, lbr, acts)
        return ds, (dxg, dhr)

    ds, (dxg, dhr) = lax.scan(body, list(dstates), (saved, dy, mask), length=steps, reverse=True)
    rows = steps * batch
    h_prev, h_last = saved[0].reshape(rows, width), saved[-1].reshape(rows, width)
    return (*weight_gradients(_OPS, c, x, w, r, dxg.reshape(rows, r.shape[0]), dhr.reshape(rows, r.shape[0]),
                              h_prev, h_last, mask), ds)


class _Direction:
    """One op's attrs and present slots; ``forward`` and ``gradients`` run its recurrence on a run's values."""

    def __init__(self, op, cell: str):
        self.c, self.reverse = CELLS[cell], bool(op.attr("is_reverse"))
        self.lbr = bool(op.attr("linear_before_reset")) if cell == "gru" else False
        self.acts = [_activation(*a) for a in activations(cell, op.attrs)]
        self.params = [p for p in PARAMS[cell] if op.input(p)]
        self.initial, self.outputs = [f"{s}0" for s in self.c.states], OUTPUTS[cell]
        self.dtype = jnp.dtype(op.block.var(op.input("X")[0]).dtype)

    def lengths(self, ctx, lens, steps: int):
        """The lengths as int64, checked to lie in [0, steps] as the numpy kernel checks them."""
        lens = lens.astype(jnp.int64)
        ctx.check(jnp.all((lens >= 0) & (lens <= steps)),
                  f"sequence lengths must be in [0, {steps}] (the time axis)")
        return lens

    def _layout(self, vals: dict, lens) -> tuple:
        """(X as the recurrence reads it, the initial states, the mask, ``flip``): X past each sequence's end
        taken as 0 (as ``recurrence_kernels`` binds it), absent initial states zeros, ``flip`` reversing each
        sequence in place for the reverse direction (its own inverse)."""
        x, r = vals["X"], vals["R"]
        steps, batch = x.shape[0], x.shape[1]
        zeros = jnp.zeros((batch, r.shape[1]), self.dtype)
        states0 = [vals.get(s, zeros) for s in self.initial]
        mask = None
        if lens is not None:
            mask = sequence_mask(jnp, lens, steps, self.dtype)
            x = jnp.where(mask > 0, x, 0.0)
        order = reverse_order(jnp, lens, steps, batch) if self.reverse else None
        flip = lambda a: reordered(jnp, a, order)  # noqa: E731
        return flip(x), states0, mask, flip

    def forward(self, vals: dict, lens, keep: bool) -> tuple[tuple, Any]:
        """((Y, final states...), what ``gradients`` reads: None unless ``keep``)."""
        x, states0, mask, flip = self._layout(vals, lens)
        y, states, saved = _sequence(self.c, self.lbr, self.acts, x, vals["W"], vals["R"], vals.get("WB"),
                                     vals.get("RB"), states0, mask, keep)
        return (flip(y), *states), saved

    def gradients(self, vals: dict, lens, saved, dy, dstates: list) -> list:
        """The gradients in the present params (PARAMS order) of <dy, Y> + <dstates, final states>."""
        x, _, mask, flip = self._layout(vals, lens)
        dx, dw, dr, dwb, drb, ds = _backward(self.c, self.lbr, self.acts, x, vals["W"], vals["R"], saved,
                                             None if dy is None else flip(dy), dstates, mask)
        grads = {"X": flip(dx), "W": dw, "R": dr, "WB": dwb, "RB": drb, **dict(zip(self.initial, ds))}
        return [grads[p] for p in self.params]

    def cotangents(self, vals: dict, name) -> tuple:
        """dY (None where absent) and the final states' gradients (zeros where absent), by ``name(output)``."""
        x, r = vals["X"], vals["R"]
        zeros = jnp.zeros((x.shape[1], r.shape[1]), self.dtype)
        dy, *ds = (vals.get(name(o)) for o in self.outputs)
        return dy, [zeros if d is None else d for d in ds]


def _bind(op, d: _Direction, ctx, slots: list[str], arrays) -> tuple[dict, Any]:
    """The op's arrays by slot (only present ones), and its lengths checked (None without SeqLens)."""
    vals = dict(zip([s for s in slots if op.input(s)], arrays))
    lens = vals.get("SeqLens")
    if lens is not None:
        lens = d.lengths(ctx, lens, vals["X"].shape[0])
    return vals, lens


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
        keep = _has_gradient_op(op, cell)

        def run(*arrays):
            vals, lens = _bind(op, d, ctx, slots, arrays)
            outs, saved = d.forward(vals, lens, keep)
            if keep:  # the steps' values, for the grad op reading the same arrays
                ctx.kept_steps[_inputs_key(op, cell)] = (arrays, saved)
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
            vals, lens = _bind(op, d, ctx, slots, arrays)
            at, saved = ctx.kept_steps.get(_inputs_key(op, cell), ((), None))
            if saved is None or len(at) != present or any(a is not b for a, b in zip(at, arrays)):
                _, saved = d.forward(vals, lens, keep=True)  # run the forward again
            dy, ds = d.cotangents(vals, grad_slot)
            grads = d.gradients(vals, lens, saved, dy, ds)
            return _cast([g for g, keep in zip(grads, named) if keep], d.dtype)

        return run

    return lowering


def _jvp(cell: str):
    def lowering(op, ctx):
        d = _Direction(op, cell)
        params, outs = PARAMS[cell], OUTPUTS[cell]
        slots = [*params, "SeqLens", *map(tangent_slot, params), *map(grad_slot, outs),
                 *(tangent_slot(grad_slot(o)) for o in outs)]
        out_tangents = [bool(op.output(tangent_slot(o))) for o in outs]
        grad_tangents = [bool(op.output(tangent_slot(grad_slot(p)))) for p in d.params]

        def run(*arrays):
            vals, lens = _bind(op, d, ctx, slots, arrays)
            primals = tuple(vals[p] for p in d.params)
            dots = tuple(vals.get(tangent_slot(p), jnp.zeros_like(vals[p])) for p in d.params)
            like, _ = jax.eval_shape(lambda *p: d.forward({**vals, **dict(zip(d.params, p))}, lens, False),
                                     *primals)
            cots = tuple(vals[grad_slot(o)] if grad_slot(o) in vals else jnp.zeros(v.shape, v.dtype)
                         for o, v in zip(outs, like))  # (dY as zeros too where absent: the reference's duals)
            cot_dots = tuple(vals.get(tangent_slot(grad_slot(o)), jnp.zeros(v.shape, v.dtype))
                             for o, v in zip(outs, like))

            def outputs_and_gradients(primals, cots):
                given = {**vals, **dict(zip(d.params, primals))}
                outputs, saved = d.forward(given, lens, keep=True)
                return outputs, d.gradients(given, lens, saved, cots[0], list(cots[1:]))

            _, (out_dots, grad_dots) = jax.jvp(outputs_and_gradients, (primals, cots), (dots, cot_dots))
            results = [t for t, keep in zip(out_dots, out_tangents) if keep]
            results += [t for t, keep in zip(grad_dots, grad_tangents) if keep]
            return _cast(results, d.dtype)

        return run

    return lowering


LOWERINGS = {**{c: _forward(c) for c in PARAMS}, **{f"{c}_grad": _grad(c) for c in PARAMS},
             **{f"{c}_jvp": _jvp(c) for c in PARAMS}}
