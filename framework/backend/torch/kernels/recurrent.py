"""The fused recurrent layers in the torch engine as PyTorch's own CPU ``nn.LSTM`` and ``nn.GRU`` run them
(``numpy/kernels/recurrent.py`` is the reference: its recurrence in numpy, step by step).

**The LSTM** runs on oneDNN's fused RNN primitive: ATen's ``mkldnn_rnn_layer`` for ``lstm`` and
``mkldnn_rnn_layer_backward`` for ``lstm_grad``. ``lstm_grad`` is a function of the forward's inputs alone (it
recomputes the recurrence: ``program/ops/recurrent``). Here the forward, when the block also has the gradient of the
same inputs, runs in training mode and keeps its outputs and oneDNN's workspace for its X (``kept``), and the
gradient reads them instead of running the forward again: what the recomputation would make, bit for bit (the same
call on the same tensors). Measured on a 50-step sequence of batch 32, 64 inputs, hidden 128, float32, two threads:
forward 3.1 ms, backward 5.8; the whole training step took 31 ms on the xla engine, 39 on numpy, 8.1 in PyTorch
(2026-12-02). oneDNN's primitive runs the cell the reference runs: gates i, f, g, o in PyTorch's layout (the op's
own), with the cell's default activations. Where it does not, the op runs step by step on the cells' shared math
(``recurrence``, ``not_fused``): float64 (oneDNN's RNN takes float32), sequence lengths and other activations.
The primitive fails on a zero size: zero steps or an empty batch leave the states as they came (no step runs) and
every weight's gradient zero; no input features run as one feature of zeros.

**The GRU** has no oneDNN primitive in ATen (its ``mkldnn_rnn_layer`` builds the LSTM's only). ATen's CPU GRU is a
loop of ATen calls a step (a product of h by R and the gates' elementwise calls), which PyTorch trains by recording
that loop for autograd; there is no fused backward to call. So ``gru`` is ``aten::gru``, and ``gru_grad`` runs that
forward with its inputs as autograd leaves and asks autograd for their gradients: the engine runs the gradient op
gradgen's maker put in the program, and autograd only computes its outputs. Where the block also has the gradient
of the same inputs, ``gru`` itself runs the recorded forward and keeps it (``kept``) for the gradient, which then
does not run the forward again; a kept forward is used once (autograd frees what it recorded as it goes back).
Measured on the same sizes: forward and gradient this way 21.4 ms against PyTorch's whole ``nn.GRU`` training
step's 19.9 (2026-12-02, a scratch script). ATen's cell is the op's with ``linear_before_reset`` (PyTorch's GRU:
n = G(x W_n + WB_n + r (h R_n + RB_n))), gates reset, update, new in the op's layout, the default activations, and
h' = (h - n) z + n as the reference writes it, in float32 and float64. An op that asks otherwise (ONNX's form
without ``linear_before_reset``, other activations) runs step by step (``recurrence``, ``gru_not_fused``).
Sequence lengths run as ``nn.GRU`` runs a packed batch (``_packed_gru``). ATen refuses zero steps: they
leave the state as it came and every weight's gradient zero. Autograd differentiates h' in n as dh' - dh' z where
the reference writes dh' (1 - z): an infinite output gradient would give NaN in X's gradient where the reference has
an infinity, so a gradient whose output gradients are not all finite (their sums, ``finite``) runs step by step,
the reference's backward (``tests/backends/test_torch_gru.py``).

**The tangent ops** (``lstm_jvp``, ``gru_jvp``: the second order) have no ATen call; they run step by step on dual
numbers (``recurrence.stepwise_tangent``), as the reference's do.
"""
from __future__ import annotations

import weakref
from typing import Callable

import torch
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from gradgen.program.ops.recurrent import OUTPUTS, PARAMS, default_activations, grad_slot

from . import kept
from .finite import all_finite
from .recurrence import stepwise_forward, stepwise_gradient, stepwise_tangent

__all__ = ["KERNELS", "gru_not_fused", "not_fused"]

_aten = torch.ops.aten

_LSTM = 2
"""The LSTM's ``mode`` in ``mkldnn_rnn_layer`` (ideep's ``rnn_kind``). The other modes, 0, 1 and 3, fail there
with "could not create a primitive descriptor for the LSTM forward propagation primitive" (torch 2.13): ATen builds
only the LSTM's primitive."""

_WEIGHTS = ("W", "R", "WB", "RB", "H0", "C0")
"""The inputs besides X that the forward's values depend on: a kept forward is read only for the same ones."""


def _other_activations(op, runner: str) -> str | None:
    """Why ``runner`` does not run ``op``'s activations (it runs the cell's defaults only), or None."""
    defaults = default_activations(op.type.removesuffix("_grad"))
    if [n.lower() for n in op.attr("activations") or []] in ([], defaults):
        return None
    return f"{runner} runs the default activations ({', '.join(defaults)}), not {op.attr('activations')}"


def not_fused(op) -> str | None:
    """Why this ``lstm`` or ``lstm_grad`` does not run on oneDNN's primitive (it runs step by step), or None."""
    dtype = op.block.var(op.input("X")[0]).dtype
    if dtype != "float32":
        return f"oneDNN's LSTM runs float32, this one is {dtype}"
    if op.input("SeqLens"):
        return "oneDNN's LSTM here takes no sequence lengths (SeqLens)"
    return _other_activations(op, "oneDNN's LSTM")


class _Run(dict):
    """One call's inputs by slot, the absent biases and initial states as zeros, X and W with one feature of zeros
    where they have none."""

    def __init__(self, slots: list[str], tensors: tuple):
        super().__init__(zip(slots, tensors))
        self.given = {s: self.get(s) for s in _WEIGHTS}
        x, r = self["X"], self["R"]
        self.steps, self.batch, self.features, self.hidden = x.shape[0], x.shape[1], x.shape[2], r.shape[1]
        for slot, shape in (("WB", r.shape[:1]), ("RB", r.shape[:1]), ("H0", (x.shape[1], self.hidden)),
                            ("C0", (x.shape[1], self.hidden))):
            if self.get(slot) is None:
                self[slot] = x.new_zeros(shape)
        if not self.features:
            self["X"], self["W"] = x.new_zeros((*x.shape[:2], 1)), x.new_zeros((r.shape[0], 1))

    @property
    def empty(self) -> bool:
        """No step runs: zero steps or an empty batch."""
        return not (self.steps and self.batch)

    def args(self) -> list[torch.Tensor]:
        return [self[s].contiguous() for s in ("X", *_WEIGHTS)]


def _forward(run: _Run, reverse: bool, train: bool) -> tuple:
    """(Y, H, C, workspace or None). ATen makes the workspace only where grad mode is on (the engine runs in
    inference mode, where it is off); no tensor here requires a gradient, so no autograd graph is recorded."""
    if run.empty:
        return run["X"].new_zeros((run.steps, run.batch, run.hidden)), run["H0"], run["C0"], None
    with torch.set_grad_enabled(train):
        return _aten.mkldnn_rnn_layer(*run.args(), reverse, [], _LSTM, run.hidden, 1, True, False, False, train)


def _key(kind: str, reverse: bool, run) -> tuple:
    """What a kept forward (``kind``: oneDNN's LSTM, ATen's GRU) of X is found by: the direction and the input
    weights' tensor (two layers may read one X: a bidirectional layer's two directions, two LSTMs side by side).
    The entry's inputs are checked too (``_kept_for``): an id may be another tensor's once the first is gone."""
    return kind, reverse, id(run.given["W"])


def has_gradient(op, weights: tuple[str, ...]) -> bool:
    """Whether ``op``'s block also has the gradient of ``op`` (``<type>_grad``) on the same inputs, X and
    ``weights`` (the forward then keeps what it reads)."""
    same = ("X", *weights, "SeqLens")
    return any(g.type == f"{op.type}_grad" and all(g.input(s) == op.input(s) for s in same)
               and bool(g.attr("is_reverse")) == bool(op.attr("is_reverse")) for g in op.block.ops)


def _keep_for(x: torch.Tensor, key: tuple, given: dict, value) -> None:
    """Keep ``value`` for ``x`` under ``key``, beside weak references to the forward's given inputs (None where
    absent): a kept forward is read only for those very inputs (``_kept_for``)."""
    kept.keep(x, key, (tuple(None if t is None else weakref.ref(t) for t in given.values()), value))


def _kept_for(x: torch.Tensor, key: tuple, given: dict):
    """What ``_keep_for`` kept for ``x`` under ``key`` where ``given`` are the inputs it was kept for, or None."""
    found = kept.kept(x, key)
    if found is None:
        return None
    refs, value = found
    alive = (None if ref is None else ref() for ref in refs)  # (a dead reference gives None: not the tensor)
    return value if all(a is t for a, t in zip(alive, given.values())) else None


def lstm(op) -> Callable:
    if not_fused(op):
        return stepwise_forward(op, "lstm")
    slots = [s for s in (*PARAMS["lstm"], "SeqLens") if op.input(s)]
    reverse, train = bool(op.attr("is_reverse")), has_gradient(op, _WEIGHTS)

    def run_lstm(*tensors):
        run = _Run(slots, tensors)
        y, h, c, workspace = _forward(run, reverse, train)
        if workspace is not None and train:
            _keep_for(tensors[0], _key("mkldnn_lstm", reverse, run), run.given, (y, h, c, workspace))
        return y, h, c

    return run_lstm


def _grad_slots(op) -> tuple[list[str], list[str], bool]:
    """A ``<cell>_grad`` op's input slots present, the inputs whose gradients it has outputs for, its direction."""
    cell = op.type.removesuffix("_grad")
    slots = [s for s in (*PARAMS[cell], "SeqLens", *map(grad_slot, OUTPUTS[cell])) if op.input(s)]
    return slots, [p for p in PARAMS[cell] if p in slots and op.output(grad_slot(p))], bool(op.attr("is_reverse"))


def lstm_grad(op) -> Callable:
    if not_fused(op):
        return stepwise_gradient(op, "lstm")
    slots, wanted, reverse = _grad_slots(op)

    def run_lstm_grad(*tensors):
        run = _Run(slots, tensors)
        dy, dh, dc = (run.get(grad_slot(o)) for o in OUTPUTS["lstm"])
        if run.empty or (dy is None and dh is None and dc is None):
            grads = {s: torch.zeros_like(run[s]) for s in ("X", *_WEIGHTS)}
            if run.empty:  # no step ran: the final states are the initial ones, and so are their gradients
                grads.update({s: d for s, d in (("H0", dh), ("C0", dc)) if d is not None})
        else:
            kept_forward = _kept_for(tensors[0], _key("mkldnn_lstm", reverse, run), run.given)
            y, h, c, workspace = kept_forward or _forward(run, reverse, True)
            dx, dw, dr, dwb, drb, dh0, dc0 = _aten.mkldnn_rnn_layer_backward(
                *run.args(), y, h, c, dy, dh, dc, reverse, _LSTM, run.hidden, 1, True, True, False, [], False,
                workspace)
            grads = {"X": dx, "W": dw, "R": dr, "WB": dwb, "RB": drb, "H0": dh0, "C0": dc0}
        if not run.features:
            grads["X"], grads["W"] = grads["X"][..., :0], grads["W"][:, :0]
        out = tuple(grads[p] for p in wanted)
        return out[0] if len(out) == 1 else out

    return run_lstm_grad


# -- the GRU ---------------------------------------------------------------------------------------------------------
_GRU_WEIGHTS = ("W", "R", "WB", "RB", "H0")
"""The inputs besides X that the forward's values depend on: a kept forward is read only for the same ones."""


def gru_not_fused(op) -> str | None:
    """Why this ``gru`` or ``gru_grad`` does not run on ATen's GRU (it runs step by step), or None."""
    if not op.attr("linear_before_reset"):
        return "ATen's GRU is the cell with linear_before_reset (PyTorch's), this op is ONNX's without it"
    return _other_activations(op, "ATen's GRU")


class _GruRun(dict):
    """One call's inputs by slot; ``given``: the forward's inputs as passed (None where absent)."""

    def __init__(self, slots: list[str], tensors: tuple):
        super().__init__(zip(slots, tensors))
        self.given = {s: self.get(s) for s in _GRU_WEIGHTS}
        self.steps, self.batch, self.hidden = self["X"].shape[0], self["X"].shape[1], self["R"].shape[1]
        self.lengths = None if self.get("SeqLens") is None else self["SeqLens"].to(torch.int64)
        if self.lengths is not None and self.batch and (
                int(self.lengths.min()) < 0 or int(self.lengths.max()) > self.steps):
            raise ValueError(f"sequence lengths must be in [0, {self.steps}] (the time axis), got "
                             f"{self.lengths.tolist()}")

    def initial_state(self) -> torch.Tensor:
        h0 = self.get("H0")
        return self["X"].new_zeros((self.batch, self.hidden)) if h0 is None else h0


class _Recorded:
    """A forward recorded for autograd: its leaves by slot, its outputs Y and H as autograd sees them, and
    whether autograd has gone back through it already (it frees what it recorded)."""

    def __init__(self, leaves: dict[str, torch.Tensor], y: torch.Tensor, h: torch.Tensor):
        self.leaves, self.y, self.h, self.used = leaves, y, h, False


def _aten_gru(x, h0, w, r, wb, rb, reverse: bool, lengths=None) -> tuple[torch.Tensor, torch.Tensor]:
    """ATen's GRU over the whole sequence, time-major, one direction: (Y, final H). The reverse direction walks
    the sequence flipped in time and flips its Y back (autograd records the flips); with ``lengths``, each sequence
    its own steps (``_packed_gru``)."""
    biases = [] if wb is None and rb is None else [torch.zeros_like(r[:, 0]) if b is None else b for b in (wb, rb)]
    if lengths is not None:
        return _packed_gru(x, h0, [w, r, *biases], reverse, lengths)
    y, h = torch.gru(x.flip(0) if reverse else x, h0.unsqueeze(0), [w, r, *biases], bool(biases), 1, 0.0, True,
                     False, False)
    return (y.flip(0) if reverse else y), h.squeeze(0)


def _within_lengths(lengths: torch.Tensor, steps: int) -> torch.Tensor:
    """[T, N]: the step each (t, n) reads when each sequence runs backwards over its own first lengths[n] steps
    (later steps stay where they are); its own inverse."""
    t = torch.arange(steps).unsqueeze(1)
    return torch.where(t < lengths, lengths - 1 - t, t)


def _packed_gru(x, h0, params: list, reverse: bool, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """ATen's GRU over sequences of their own lengths, as ``nn.GRU`` runs a packed batch: a sequence's steps at or
    past its length output zero and keep its state (the op's rule, ONNX's). ATen packs only sequences with steps,
    so one of length 0 is left out of the call: its output zero, its final state H0 (and H0's gradient the final
    state's), whatever its X holds."""
    steps, width = x.shape[0], h0.shape[1]
    if reverse:
        order = _within_lengths(lengths, steps).unsqueeze(2)
        x = x.gather(0, order.expand(-1, -1, x.shape[2]))
    y, h = x.new_zeros((steps, x.shape[1], width)), h0
    some = torch.nonzero(lengths).squeeze(1)
    if some.numel():
        packed = pack_padded_sequence(x.index_select(1, some), lengths[some], enforce_sorted=False)
        hx = h0.index_select(0, some).index_select(0, packed.sorted_indices).unsqueeze(0)
        out, hn = torch.gru(packed.data, packed.batch_sizes, hx, params, len(params) == 4, 1, 0.0, True, False)
        ran = PackedSequence(out, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices)
        y = y.index_copy(1, some, pad_packed_sequence(ran, total_length=steps)[0])
        h = h.index_copy(0, some, hn.squeeze(0).index_select(0, packed.unsorted_indices))
    if reverse:
        y = y.gather(0, order.expand(-1, -1, width))
    return y, h


def _recorded_forward(run: _GruRun, reverse: bool) -> _Recorded:
    """The forward with every given input an autograd leaf (copies made outside inference mode: the engine's own
    tensors are inference tensors, which autograd does not save)."""
    with torch.inference_mode(False), torch.enable_grad():
        leaves = {s: t.clone().requires_grad_() for s, t in run.items() if s in PARAMS["gru"] and t is not None}
        h0 = leaves.get("H0")
        y, h = _aten_gru(leaves["X"], run.initial_state() if h0 is None else h0, leaves["W"], leaves["R"],
                         leaves.get("WB"), leaves.get("RB"), reverse, run.lengths)
    return _Recorded(leaves, y, h)


def gru(op) -> Callable:
    if gru_not_fused(op):
        return stepwise_forward(op, "gru")
    slots = [s for s in (*PARAMS["gru"], "SeqLens") if op.input(s)]
    reverse, train = bool(op.attr("is_reverse")), has_gradient(op, _GRU_WEIGHTS)

    def run_gru(*tensors):
        run = _GruRun(slots, tensors)
        if not run.steps:
            return run["X"].new_zeros((0, run.batch, run.hidden)), run.initial_state()
        if not train:
            return _aten_gru(run["X"], run.initial_state(), run["W"], run["R"], run.get("WB"), run.get("RB"),
                             reverse, run.lengths)
        recorded = _recorded_forward(run, reverse)
        _keep_for(tensors[0], _key("aten_gru", reverse, run), run.given, recorded)
        return recorded.y.detach(), recorded.h.detach()

    return run_gru


def _kept_gru(x: torch.Tensor, run: _GruRun, reverse: bool) -> _Recorded | None:
    """The forward kept for ``x`` on these same inputs and not yet gone back through, or None."""
    recorded = _kept_for(x, _key("aten_gru", reverse, run), run.given)
    return recorded if recorded is not None and not recorded.used else None


def gru_grad(op) -> Callable:
    stepwise = stepwise_gradient(op, "gru")
    if gru_not_fused(op):
        return stepwise
    slots, wanted, reverse = _grad_slots(op)

    def run_gru_grad(*tensors):
        run = _GruRun(slots, tensors)
        cotangents = [(o, run.get(grad_slot(o))) for o in OUTPUTS["gru"] if run.get(grad_slot(o)) is not None]
        if not all_finite(*(d for _, d in cotangents)):  # (autograd's inf - inf: the module docstring)
            return stepwise(*tensors)
        if not run.steps or not cotangents:
            grads = {s: torch.zeros_like(run[s]) for s in wanted}
            if not run.steps and run.get("H0") is not None and run.get("H@GRAD") is not None:
                grads["H0"] = run["H@GRAD"]  # no step ran: the final state is the initial one
        else:
            recorded = _kept_gru(tensors[0], run, reverse) or _recorded_forward(run, reverse)
            recorded.used = True
            outputs = {"Y": recorded.y, "H": recorded.h}
            read = [(outputs[o], d) for o, d in cotangents if outputs[o].requires_grad]  # (none: every length 0)
            with torch.inference_mode(False):
                found = torch.autograd.grad([y for y, _ in read], [recorded.leaves[s] for s in wanted],
                                            [d for _, d in read], allow_unused=True) if read else [None] * len(wanted)
            grads = {s: torch.zeros_like(run[s]) if g is None else g.detach() for s, g in zip(wanted, found)}
        out = tuple(grads[p] for p in wanted)
        return out[0] if len(out) == 1 else out

    return run_gru_grad


KERNELS = {"lstm": lstm, "lstm_grad": lstm_grad, "gru": gru, "gru_grad": gru_grad,
           **{f"{cell}_jvp": (lambda op, cell=cell: stepwise_tangent(op, cell)) for cell in ("lstm", "gru")}}
