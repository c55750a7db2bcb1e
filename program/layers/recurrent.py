"""Recurrent layers: ``lstm`` and ``gru``, stacked and optionally bidirectional, as PyTorch's nn.LSTM / nn.GRU.

Each layer and direction is one fused ``lstm``/``gru`` op over the whole sequence (see
``program.ops.recurrent``). Parameters follow PyTorch's names and layout, so its weights load one to one:
``{name}.weight_ih_l{k}[_reverse]`` ``[G*H, inputs]``, ``weight_hh`` ``[G*H, H]``, ``bias_ih``, ``bias_hh``
``[G*H]``, gates stacked in PyTorch's order (LSTM: input, forget, cell, output; GRU: reset, update, new),
initialized uniform in +-1/sqrt(H) as PyTorch does.
"""
from __future__ import annotations

import math
from typing import Sequence

from ..errors import ProgramError
from ..guard import default_main_program
from ..initializer import Uniform
from ..ops.recurrent import ACTIVATIONS, GATES
from ..variable import Variable
from .creation import create_parameter
from .helper import append, check_var
from .manipulation import concat, slice, squeeze, stack, transpose
from .naming import named


def _defaults(name: str) -> tuple:
    """The (alpha, beta) defaults of activation ``name`` (none for a name the op will refuse)."""
    known = ACTIVATIONS.get(name.lower())
    return known.defaults if known else ()


def _initial(states: Variable | None, index: int) -> Variable | None:
    """Layer-direction ``index``'s initial state from a ``[layers * directions, N, H]`` var."""
    if states is None:
        return None
    return squeeze(slice(states, [0], [index], [index + 1]), [0])


def _params(base: str, layer: int, suffix: str, gates: int, inputs: int, hidden: int, dtype: str, bias: bool):
    bound = 1.0 / math.sqrt(hidden)
    make = lambda kind, shape: create_parameter(  # noqa: E731
        shape, dtype, name=f"{base}.{kind}_l{layer}{suffix}", initializer=Uniform(-bound, bound))
    w, r = make("weight_ih", [gates * hidden, inputs]), make("weight_hh", [gates * hidden, hidden])
    if not bias:
        return {"W": w, "R": r}
    return {"W": w, "R": r, "WB": make("bias_ih", [gates * hidden]), "RB": make("bias_hh", [gates * hidden])}


Activations = Sequence["str | tuple[str, float, float]"]
"""A cell's activations (LSTM f, g, h; GRU f, g): ONNX's names (lowercase), each alone (its default alpha and
beta) or as (name, alpha, beta)."""


def _activation_attrs(activations: Activations | None) -> dict:
    """The op attrs of ``activations`` ({} for the cell's defaults), each alpha and beta filled in."""
    if activations is None:
        return {}
    acts = [(a, None, None) if isinstance(a, str) else tuple(a) for a in activations]
    filled = [(n, *[p if p is not None else (_defaults(n) + (0.0, 0.0))[k]
                    for k, p in enumerate((a, b))]) for n, a, b in acts]
    return {"activations": [n for n, _, _ in filled], "activation_alpha": [a for _, a, _ in filled],
            "activation_beta": [b for _, _, b in filled]}


def _recurrent(cell: str, x: Variable, hidden_size: int, num_layers: int, bidirectional: bool, batch_first: bool,
               initial_states: Sequence[Variable | None], sequence_length: Variable | None, bias: bool,
               name: str | None, attrs: dict):
    x = check_var(x, f"{cell} input")
    if len(x.shape) != 3:
        raise ProgramError(f"{cell} needs a [steps, batch, features] input (batch_first: [batch, steps, features]), "
                           f"got '{x.name}' {x.type_str()}")
    if hidden_size <= 0 or num_layers <= 0:
        raise ProgramError(f"{cell} needs a positive hidden_size and num_layers, got {hidden_size}, {num_layers}")
    if x.shape[2] < 0:
        raise ProgramError(f"{cell} needs the feature dim of '{x.name}' known, got {x.type_str()}")
    base = name or default_main_program().unique_name(cell)
    dirs = 2 if bidirectional else 1
    seq = transpose(x, [1, 0, 2]) if batch_first else x
    finals: list[list[Variable]] = [[] for _ in initial_states]
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            index = layer * dirs + d
            inputs = {"X": seq, **_params(base, layer, "_reverse" if d else "", GATES[cell], seq.shape[2],
                                          hidden_size, x.dtype, bias)}
            for slot, states in zip(("H0", "C0"), initial_states):
                if states is not None:
                    inputs[slot] = _initial(states, index)
            if sequence_length is not None:
                inputs["SeqLens"] = sequence_length
            slots = ("Y", "H", "C")[:1 + len(initial_states)]
            y, *last = append(cell, inputs, {**attrs, "is_reverse": bool(d)}, slots, name=f"{base}.l{layer}_{d}")
            outs.append(y)
            for k, v in enumerate(last):
                finals[k].append(v)
        seq = concat(outs, axis=2) if dirs == 2 else outs[0]
    y = transpose(seq, [1, 0, 2]) if batch_first else seq
    return y, [stack(f, axis=0, name=f"{name}.{slot}" if name else None) for f, slot in zip(finals, "hc")]


@named
def lstm(x: Variable, hidden_size: int, num_layers: int = 1, bidirectional: bool = False, batch_first: bool = False,
         initial_states: tuple[Variable, Variable] | None = None, sequence_length: Variable | None = None,
         bias: bool = True, name: str | None = None, activations: Activations | None = None,
         ) -> tuple[Variable, tuple[Variable, Variable]]:
    """PyTorch's ``nn.LSTM``: ``(outputs, (h_n, c_n))``.

    ``x`` is ``[T, N, I]`` (``[N, T, I]`` with batch_first); outputs ``[T, N, dirs * H]`` (batch_first:
    ``[N, T, dirs * H]``), ``h_n``, ``c_n`` ``[num_layers * dirs, N, H]``; ``initial_states`` (h0, c0) are shaped
    like them (zeros when None). ``sequence_length`` (int ``[N]``) ends each sequence early, as ONNX's
    sequence_lens: later steps output zero, the final states are those at each sequence's end, and the reverse
    direction starts from each sequence's own last step. ``activations`` replaces the
    cell's default gates (``ops.recurrent.DEFAULT_ACTIVATIONS``) by any of ONNX's (see ``Activations``), in every layer and direction.
    """
    h0, c0 = initial_states if initial_states is not None else (None, None)
    y, (h, c) = _recurrent("lstm", x, hidden_size, num_layers, bidirectional, batch_first, [h0, c0],
                           sequence_length, bias, name, _activation_attrs(activations))
    return y, (h, c)


@named
def gru(x: Variable, hidden_size: int, num_layers: int = 1, bidirectional: bool = False, batch_first: bool = False,
        initial_state: Variable | None = None, sequence_length: Variable | None = None, bias: bool = True,
        linear_before_reset: bool = True, name: str | None = None, activations: Activations | None = None,
        ) -> tuple[Variable, Variable]:
    """PyTorch's ``nn.GRU``: ``(outputs, h_n)``, shaped as ``lstm``'s. ``linear_before_reset`` (PyTorch's GRU, the
    default) applies the reset gate to ``h R_n^T + RB_n``; False applies it to h before the product (ONNX's
    default GRU); ``activations`` replaces the default gates as in ``lstm``."""
    y, (h,) = _recurrent("gru", x, hidden_size, num_layers, bidirectional, batch_first, [initial_state],
                         sequence_length, bias, name,
                         {"linear_before_reset": linear_before_reset, **_activation_attrs(activations)})
    return y, h


__all__ = ["lstm", "gru", "Activations"]
