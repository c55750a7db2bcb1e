"""The kernels of the recurrent ops (``lstm``/``gru``, their ``*_grad`` and ``*_jvp``) for the engines that run the
cells step by step in Python: the numpy reference, and the torch engine where ATen's fused calls do not run an op
as the reference does. Written once over the engine's ``xp`` (its arrays under numpy's names) and its dual-number
operations (``dual.dual_ops``), as the cells' math and loops are (``recurrence``).

Each kernel binds the op's slots to one direction of ``recurrence``'s loops: absent initial states are zeros;
``is_reverse`` walks each sequence backwards from its own end (its own length where SeqLens is given); with
SeqLens the steps past a sequence's end keep its state and output zero, and their X (and its tangent) is not read
(taken as 0: NaN or an infinity in a batch's padding changes nothing, as in PyTorch's packed sequences). The
``*_jvp`` kernels run the forward and the backward on dual numbers: the forward gives the outputs' tangents, the
backward (the output gradients' tangents among its inputs) the gradients' tangents.
"""
from __future__ import annotations

from typing import Any, Callable

from .dual import Dual, value
from .recurrence import CELLS, gate_activation, run_backward, run_forward
from .recurrent import OUTPUTS, PARAMS, activations, grad_slot, tangent_slot

__all__ = ["Finish", "forward_kernel", "gradient_kernel", "reordered", "reverse_order", "sequence_mask",
           "tangent_kernel"]

Finish = Callable[[list, Any], list]
"""``finish(results, x)``: the engine's last word on a kernel's results (numpy's casts them to X's dtype)."""


def reordered(xp, a, order):
    """``a`` (time-major) with each sequence reordered by ``order`` ``[T, N]`` (None: as it is), array or dual."""
    if order is None or a is None:
        return a
    if isinstance(a, Dual):
        return Dual(reordered(xp, a.v, order), reordered(xp, a.d, order))
    return xp.take_along_axis(a, order[:, :, None], axis=0)


def sequence_mask(xp, lens, steps: int, dtype):
    """``[T, N, 1]``: 1 where step t is inside sequence n (t < lens[n]), in ``dtype``."""
    return xp.astype(xp.arange(steps)[:, None] < lens[None, :], dtype)[:, :, None]


def reverse_order(xp, lens, steps: int, batch: int):
    """``[T, N]``: the step each step's place reads in the reverse direction, each sequence reversed in place (its
    own first ``lens[n]`` steps; all of them where ``lens`` is None). Its own inverse."""
    t = xp.arange(steps)[:, None]
    if lens is None:
        return xp.broadcast_to(steps - 1 - t, (steps, batch))
    return xp.where(t < lens[None, :], lens[None, :] - 1 - t, t)


class _Direction:
    """One op's cell, direction, activations and present slots."""

    def __init__(self, op, cell: str, slots: list[str], xp, dual):
        self.xp, self.dual = xp, dual
        self.cell, self.reverse = CELLS[cell], bool(op.attr("is_reverse"))
        self.lbr = bool(op.attr("linear_before_reset")) if cell == "gru" else False
        self.acts = [gate_activation(*a, xp, dual) for a in activations(cell, op.attrs)]
        self.slots = [s for s in slots if op.input(s)]
        self.initial, self.outputs = [f"{s}0" for s in self.cell.states], OUTPUTS[cell]
        self.params = [p for p in PARAMS[cell] if p in self.slots]

    def bind(self, arrays) -> tuple[dict, Any, Any]:
        """The run's arrays by slot (X and its tangent past each sequence's end 0, absent initial states zeros), the
        ``[T, N, 1]`` mask (None without lengths) and the ``[T, N]`` order that reverses each sequence in place for
        the reverse direction (its own inverse; None forward)."""
        xp, vals = self.xp, dict(zip(self.slots, arrays))
        x, r = vals["X"], vals["R"]
        steps, batch = x.shape[0], x.shape[1]
        mask, lens = None, vals.get("SeqLens")
        if lens is not None:
            lens = xp.astype(lens, xp.int64)
            if lens.shape[0] and (int(lens.min()) < 0 or int(lens.max()) > steps):
                raise ValueError(f"sequence lengths must be in [0, {steps}] (the time axis), got {lens.tolist()}")
            mask = sequence_mask(xp, lens, steps, x.dtype)
            for slot in ("X", tangent_slot("X")):
                if slot in vals:
                    vals[slot] = xp.astype(xp.where(mask > 0, vals[slot], 0), x.dtype)
        order = reverse_order(xp, lens, steps, batch) if self.reverse else None
        for s in self.initial:
            if vals.get(s) is None:
                vals[s] = xp.zeros((batch, r.shape[1]), x.dtype)
        return vals, mask, order

    def forward(self, vals: dict, mask, order) -> tuple:
        """(Y, the final states, every step's values for the gradient)."""
        y, states, saved = run_forward(self.dual, self.cell, reordered(self.xp, vals["X"], order), vals["W"],
                                       vals["R"], vals.get("WB"), vals.get("RB"), [vals[s] for s in self.initial],
                                       mask, self.lbr, self.acts)
        return reordered(self.xp, y, order), states, saved

    def gradients(self, vals: dict, mask, order, saved: list, dy, dstates: list) -> dict:
        """The gradients of <dy, Y> + <dstates, final states> by param slot."""
        flip = lambda a: reordered(self.xp, a, order)  # noqa: E731
        dx, dw, dr, dwb, drb, ds = run_backward(self.dual, self.cell, flip(vals["X"]), saved, vals["W"], vals["R"],
                                                flip(dy), dstates, mask, self.lbr, self.acts)
        return {"X": flip(dx), "W": dw, "R": dr, "WB": dwb, "RB": drb, **dict(zip(self.initial, ds))}


def _result(values: list):
    return values[0] if len(values) == 1 else tuple(values)


def forward_kernel(op, cell: str, xp, dual, finish: Finish) -> Callable:
    """The kernel of a ``lstm``/``gru`` op."""
    d = _Direction(op, cell, [*PARAMS[cell], "SeqLens"], xp, dual)

    def run(*arrays):
        vals, mask, order = d.bind(arrays)
        y, states, _ = d.forward(vals, mask, order)
        return _result(finish([y, *states], vals["X"]))

    return run


def gradient_kernel(op, cell: str, xp, dual, finish: Finish) -> Callable:
    """The kernel of a ``lstm_grad``/``gru_grad`` op: the forward again, then back through it (absent output
    gradients: none for Y, zeros for the final states)."""
    d = _Direction(op, cell, [*PARAMS[cell], "SeqLens", *map(grad_slot, OUTPUTS[cell])], xp, dual)
    wanted = [p for p in d.params if op.output(grad_slot(p))]

    def run(*arrays):
        vals, mask, order = d.bind(arrays)
        _, _, saved = d.forward(vals, mask, order)
        dstates = [vals.get(grad_slot(s)) for s in d.outputs[1:]]
        dstates = [xp.zeros_like(vals[s0]) if g is None else g for g, s0 in zip(dstates, d.initial)]
        grads = d.gradients(vals, mask, order, saved, vals.get(grad_slot("Y")), dstates)
        return _result(finish([grads[p] for p in wanted], vals["X"]))

    return run


def tangent_kernel(op, cell: str, xp, dual, finish: Finish) -> Callable:
    """The kernel of a ``lstm_jvp``/``gru_jvp`` op: the outputs' tangents, then the gradients' tangents."""
    params, outs = PARAMS[cell], OUTPUTS[cell]
    d = _Direction(op, cell, [*params, "SeqLens", *map(tangent_slot, params), *map(grad_slot, outs),
                              *(tangent_slot(grad_slot(o)) for o in outs)], xp, dual)
    out_tangents = [bool(op.output(tangent_slot(o))) for o in outs]
    grad_tangents = [bool(op.output(tangent_slot(grad_slot(p)))) for p in d.params]

    def dual_of(vals: dict, slot: str, like) -> Dual:
        base = vals[slot] if slot in vals else xp.zeros_like(like)
        return Dual(base, vals.get(tangent_slot(slot), xp.zeros_like(base)))

    def run(*arrays):
        vals, mask, order = d.bind(arrays)
        duals = {**vals, **{p: dual_of(vals, p, None) for p in params if p in vals}}
        y, states, saved = d.forward(duals, mask, order)
        results = [dual.tangent(v) for v, keep in zip([y, *states], out_tangents) if keep]
        if any(grad_tangents):
            dy, *ds = (dual_of(vals, grad_slot(o), value(v)) for o, v in zip(outs, [y, *states]))
            grads = d.gradients(duals, mask, order, saved, dy, ds)
            results += [dual.tangent(grads[p]) for p, keep in zip(d.params, grad_tangents) if keep]
        return _result(finish(results, vals["X"]))

    return run
