"""Kernels of the fused recurrent ops (lstm, gru), their gradients (``*_grad``) and their tangents (``*_jvp``).

Each binds the op's slots to ``recurrence``'s one-direction recurrence: absent initial states are zeros,
``is_reverse`` runs each sequence backwards (its own length when SeqLens is given), SeqLens masks steps past a
sequence's end, whose X is not read (taken as 0: NaN or an infinity in a batch's padding changes nothing, as in
PyTorch's packed sequences). The ``*_jvp`` kernels run the same recurrence on dual numbers (see ``recurrence``).
"""
from __future__ import annotations

import copy

import numpy as np

from gradgen.program.ops.recurrence import CELLS, run_backward as backward, run_forward as forward
from gradgen.program.ops.recurrent import OUTPUTS, PARAMS, activations, grad_slot, tangent_slot

from .recurrence import DUAL, Dual, activation, reverse_index, sequence_mask, value

__all__ = ["KERNELS"]


class _Direction:
    """The op's attrs and present slots, and how its arrays map to the recurrence's."""

    def __init__(self, op, cell_type: str, in_slots: list[str]):
        self.cell, self.lbr = CELLS[cell_type], bool(op.attr("linear_before_reset")) if cell_type == "gru" else False
        self.reverse = bool(op.attr("is_reverse"))
        self.acts = [activation(*a) for a in activations(cell_type, op.attrs)]
        self.params, self.outputs = PARAMS[cell_type], OUTPUTS[cell_type]
        self.present = [s for s in in_slots if op.input(s)]
        self.initial = [f"{s}0" for s in self.cell.states]
        self.mask, self.order = None, None

    def bind(self, arrays) -> tuple["_Direction", dict]:
        """A copy of this direction for one run (its lengths' mask and reverse order), and the run's arrays by
        slot, absent initial states as zeros."""
        run, vals = copy.copy(self), dict(zip(self.present, arrays))
        x, r = vals["X"], vals["R"]
        steps, batch, dtype = x.shape[0], x.shape[1], x.dtype
        lens = vals.get("SeqLens")
        lens = None if lens is None else np.asarray(lens).astype(np.int64)
        run.mask = None if lens is None else sequence_mask(lens, steps, dtype)
        run.order = reverse_index(lens, steps, batch) if self.reverse else None
        if run.mask is not None:  # the steps past a sequence's end are not read: their X (and its tangent) as 0
            for slot in ("X", tangent_slot("X")):
                if slot in vals:
                    vals[slot] = np.where(run.mask > 0, vals[slot], 0).astype(dtype, copy=False)
        for s in self.initial:
            vals.setdefault(s, np.zeros((batch, r.shape[1]), dtype))
        return run, vals

    def flip(self, a):
        """``a`` (time-major) with each sequence reversed, when the direction is reverse."""
        return a[self.order] if self.order is not None and a is not None else a

    def run_forward(self, vals: dict):
        y, states, saved = forward(DUAL, self.cell, self.flip(vals["X"]), vals["W"], vals["R"], vals.get("WB"),
                                   vals.get("RB"), [vals[s] for s in self.initial], self.mask, self.lbr, self.acts)
        return self.flip(y), states, saved

    def run_backward(self, vals: dict, saved: list, dy, dstates):
        dx, dw, dr, dwb, drb, ds = backward(DUAL, self.cell, self.flip(vals["X"]), saved, vals["W"], vals["R"],
                                            self.flip(dy), dstates, self.mask, self.lbr, self.acts)
        grads = {"X": self.flip(dx), "W": dw, "R": dr, "WB": dwb, "RB": drb, **dict(zip(self.initial, ds))}
        return [grads[p] for p in self.params if p in self.present]


def _result(values: list):
    return values[0] if len(values) == 1 else tuple(values)


def _cast(values: list, dtype) -> list:
    return [np.asarray(v).astype(dtype, copy=False) for v in values]


def _forward_kernel(cell_type: str):
    def factory(op):
        d = _Direction(op, cell_type, [*PARAMS[cell_type], "SeqLens"])

        def run(*arrays):
            run, vals = d.bind(arrays)
            y, states, _ = run.run_forward(vals)
            return _result(_cast([y, *states], vals["X"].dtype))

        return run

    return factory


def _cotangents(d: _Direction, vals: dict) -> tuple:
    """dY (None when absent) and the final states' gradients (zeros where absent)."""
    ds = [vals.get(grad_slot(s), np.zeros_like(vals[s0])) for s, s0 in zip(d.cell.states, d.initial)]
    return vals.get(grad_slot("Y")), ds


def _grad_kernel(cell_type: str):
    def factory(op):
        outs = OUTPUTS[cell_type]
        d = _Direction(op, cell_type, [*PARAMS[cell_type], "SeqLens", *map(grad_slot, outs)])
        named = [bool(op.output(grad_slot(p))) for p in PARAMS[cell_type] if op.input(p)]  # the outputs it has

        def run(*arrays):
            run, vals = d.bind(arrays)
            _, _, saved = run.run_forward(vals)
            dy, ds = _cotangents(run, vals)
            grads = run.run_backward(vals, saved, dy, ds)
            return _result(_cast([g for g, keep in zip(grads, named) if keep], vals["X"].dtype))

        return run

    return factory


def _jvp_kernel(cell_type: str):
    def factory(op):
        params, outs = PARAMS[cell_type], OUTPUTS[cell_type]
        d = _Direction(op, cell_type, [*params, "SeqLens", *map(tangent_slot, params), *map(grad_slot, outs),
                                       *(tangent_slot(grad_slot(o)) for o in outs)])
        out_tangents = [bool(op.output(tangent_slot(o))) for o in outs]
        grad_tangents = [bool(op.output(tangent_slot(grad_slot(p)))) for p in params if op.input(p)]

        def dual(vals: dict, slot: str, like):
            base = vals[slot] if slot in vals else np.zeros_like(like)
            return Dual(base, vals.get(tangent_slot(slot), np.zeros_like(base)))

        def run(*arrays):
            run, vals = d.bind(arrays)
            duals = {**vals, **{p: dual(vals, p, None) for p in params if p in vals}}
            y, states, saved = run.run_forward(duals)
            results = [DUAL.tangent(v) for v, keep in zip([y, *states], out_tangents) if keep]
            if any(grad_tangents):
                dy, *ds = (dual(vals, grad_slot(o), value(v)) for o, v in zip(outs, [y, *states]))
                grads = run.run_backward(duals, saved, dy, ds)
                results += [DUAL.tangent(g) for g, keep in zip(grads, grad_tangents) if keep]
            return _result(_cast(results, vals["X"].dtype))

        return run

    return factory


KERNELS = {**{c: _forward_kernel(c) for c in PARAMS}, **{f"{c}_grad": _grad_kernel(c) for c in PARAMS},
           **{f"{c}_jvp": _jvp_kernel(c) for c in PARAMS}}
