"""The GRU in the torch engine on ATen's own recurrence, as PyTorch's CPU ``nn.GRU`` runs it: ``aten::gru`` for
``gru``, and for ``gru_grad`` autograd through that same call (``numpy/kernels/recurrent.py`` is the reference:
its recurrence in numpy, step by step; ``recurrent.py`` here runs the LSTM on oneDNN's primitive, which ATen does
not build for the GRU).

ATen's CPU GRU is a loop of ATen calls a step (a product of h by R and the gates' elementwise calls), and PyTorch
trains it by recording that loop for autograd; there is no fused backward to call. So ``gru_grad`` here runs the
forward with its inputs as autograd leaves and asks autograd for their gradients: the engine runs the gradient op
gradgen's maker put in the program, and autograd only computes its outputs. Where the block also has the gradient
of the same inputs, ``gru`` itself runs that recorded forward and keeps it (``kept``) for the gradient, which then
does not run the forward again; a kept forward is used once (autograd frees what it recorded as it goes back).
Measured on a 50-step sequence of batch 32, 64 inputs, hidden 128, float32, two threads: forward and gradient
this way 21.4 ms against PyTorch's whole ``nn.GRU`` training step's 19.9 (2026-12-02, a scratch script).

ATen's cell is the op's with ``linear_before_reset`` (PyTorch's GRU: n = G(x W_n + WB_n + r (h R_n + RB_n))),
gates reset, update, new in the op's layout, the default activations, and h' = (h - n) z + n as the reference
writes it. Where an op asks otherwise (the ONNX form without ``linear_before_reset``, other activations, sequence
lengths) it is refused (``REFUSES``) and the program runs on numpy or xla. ATen
refuses zero steps: they leave the state as it came (no step runs) and every weight's gradient zero.
"""
from __future__ import annotations

from typing import Callable

import torch

from gradgen.program.ops.recurrent import OUTPUTS, PARAMS, default_activations, grad_slot

from . import kept
from .recurrent import has_gradient, still_given, weakly

__all__ = ["KERNELS", "REFUSES"]

_WEIGHTS = ("W", "R", "WB", "RB", "H0")
"""The inputs besides X that the forward's values depend on: a kept forward is read only for the same ones."""


def refused(op) -> str | None:
    """Why this ``gru`` or ``gru_grad`` does not run on ATen's GRU, or None."""
    if not op.attr("linear_before_reset"):
        return ("ATen's GRU is the cell with linear_before_reset (PyTorch's), this op is ONNX's without it; "
                "run it on numpy or xla")
    if op.input("SeqLens"):
        return "ATen's GRU here takes no sequence lengths (SeqLens); run it on numpy or xla"
    defaults = default_activations("gru")
    if [n.lower() for n in op.attr("activations") or []] not in ([], defaults):
        return (f"ATen's GRU runs the default activations ({', '.join(defaults)}), not {op.attr('activations')}; "
                "run it on numpy or xla")
    return None


class _Run(dict):
    """One call's inputs by slot; ``given``: the forward's inputs as passed (None where absent)."""

    def __init__(self, slots: list[str], tensors: tuple):
        super().__init__(zip(slots, tensors))
        self.given = {s: self.get(s) for s in _WEIGHTS}
        self.steps, self.batch, self.hidden = self["X"].shape[0], self["X"].shape[1], self["R"].shape[1]

    def initial_state(self) -> torch.Tensor:
        h0 = self.get("H0")
        return self["X"].new_zeros((self.batch, self.hidden)) if h0 is None else h0


class _Recorded:
    """A forward recorded for autograd: its leaves by slot, its outputs Y and H as autograd sees them, and
    whether autograd has gone back through it already (it frees what it recorded)."""

    def __init__(self, leaves: dict[str, torch.Tensor], y: torch.Tensor, h: torch.Tensor):
        self.leaves, self.y, self.h, self.used = leaves, y, h, False


def _aten_gru(x, h0, w, r, wb, rb, reverse: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """ATen's GRU over the whole sequence, time-major, one direction: (Y, final H). The reverse direction walks
    the sequence flipped in time and flips its Y back (autograd records the flips)."""
    biases = [] if wb is None and rb is None else [torch.zeros_like(r[:, 0]) if b is None else b for b in (wb, rb)]
    y, h = torch.gru(x.flip(0) if reverse else x, h0.unsqueeze(0), [w, r, *biases], bool(biases), 1, 0.0, True,
                     False, False)
    return (y.flip(0) if reverse else y), h.squeeze(0)


def _recorded_forward(run: _Run, reverse: bool) -> _Recorded:
    """The forward with every given input an autograd leaf (copies made outside inference mode: the engine's own
    tensors are inference tensors, which autograd does not save)."""
    with torch.inference_mode(False), torch.enable_grad():
        leaves = {s: t.clone().requires_grad_() for s, t in run.items() if s in PARAMS["gru"] and t is not None}
        h0 = leaves.get("H0")
        y, h = _aten_gru(leaves["X"], run.initial_state().clone() if h0 is None else h0, leaves["W"], leaves["R"],
                         leaves.get("WB"), leaves.get("RB"), reverse)
    return _Recorded(leaves, y, h)


def _key(reverse: bool, run: _Run) -> tuple:
    """What a kept forward of X is found by: the direction and the input weights' tensor (a bidirectional layer's
    two directions read one X). The entry's inputs are checked too (``_kept_forward``)."""
    return "aten_gru", reverse, id(run.given["W"])


def gru(op) -> Callable:
    slots = [s for s in (*PARAMS["gru"], "SeqLens") if op.input(s)]
    reverse, train = bool(op.attr("is_reverse")), has_gradient(op, _WEIGHTS)

    def run_gru(*tensors):
        run = _Run(slots, tensors)
        if not run.steps:
            return run["X"].new_zeros((0, run.batch, run.hidden)), run.initial_state()
        if not train:
            return _aten_gru(run["X"], run.initial_state(), run["W"], run["R"], run.get("WB"), run.get("RB"),
                             reverse)
        recorded = _recorded_forward(run, reverse)
        kept.keep(tensors[0], _key(reverse, run), (weakly(run.given), recorded))
        return recorded.y.detach(), recorded.h.detach()

    return run_gru


def _kept_forward(x: torch.Tensor, run: _Run, reverse: bool) -> _Recorded | None:
    """The forward kept for ``x`` on these same inputs and not yet gone back through, or None."""
    found = kept.kept(x, _key(reverse, run))
    if found is None:
        return None
    refs, recorded = found
    return recorded if still_given(refs, run.given) and not recorded.used else None


def gru_grad(op) -> Callable:
    slots = [s for s in (*PARAMS["gru"], "SeqLens", *map(grad_slot, OUTPUTS["gru"])) if op.input(s)]
    wanted = [p for p in PARAMS["gru"] if p in slots and op.output(grad_slot(p))]  # the outputs it has
    reverse = bool(op.attr("is_reverse"))

    def run_gru_grad(*tensors):
        run = _Run(slots, tensors)
        cotangents = [(o, run.get(grad_slot(o))) for o in OUTPUTS["gru"] if run.get(grad_slot(o)) is not None]
        if not run.steps or not cotangents:
            grads = {s: torch.zeros_like(run[s]) for s in wanted}
            if not run.steps and run.get("H0") is not None and run.get("H@GRAD") is not None:
                grads["H0"] = run["H@GRAD"]  # no step ran: the final state is the initial one
        else:
            recorded = _kept_forward(tensors[0], run, reverse) or _recorded_forward(run, reverse)
            recorded.used = True
            outputs = {"Y": recorded.y, "H": recorded.h}
            with torch.inference_mode(False):
                found = torch.autograd.grad([outputs[o] for o, _ in cotangents], [recorded.leaves[s] for s in wanted],
                                            [d.clone() for _, d in cotangents], allow_unused=True)
            grads = {s: torch.zeros_like(run[s]) if g is None else g.detach() for s, g in zip(wanted, found)}
        out = tuple(grads[p] for p in wanted)
        return out[0] if len(out) == 1 else out

    return run_gru_grad


KERNELS = {"gru": gru, "gru_grad": gru_grad}

REFUSES = {"gru": refused, "gru_grad": refused}
"""op type -> ``refused(op)``: why this op (its dtype, its inputs or attrs) does not run here, or None."""
