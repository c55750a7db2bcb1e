"""The fused recurrent ops: ``lstm`` and ``gru`` over a whole sequence, their gradients and their tangents.

One op is one direction of one layer (layers stack them; bidirectional runs two and concatenates), time-major:
X ``[T, N, I]``, states ``[N, H]``. Weights in PyTorch's layout, gates stacked along the rows: W ``[G*H, I]``
(PyTorch's weight_ih), R ``[G*H, H]`` (weight_hh), biases WB, RB ``[G*H]`` (bias_ih, bias_hh); LSTM (G = 4)
gates input, forget, cell, output; GRU (G = 3) reset, update, new.

- ``lstm_grad``/``gru_grad``: the gradients of ``<Y@GRAD, Y> + <H@GRAD, H> (+ <C@GRAD, C>)`` in every given
  input (the forward recurrence is recomputed: the op is a function of its inputs alone).
- ``lstm_jvp``/``gru_jvp``: forward mode through the recurrence. ``Y@DOT`` etc. are the outputs' tangents
  when the inputs move by ``X@DOT`` etc.; ``X@GRAD@DOT`` etc. are the tangents of the ``*_grad`` op's outputs
  when also the output gradients move by ``Y@GRAD@DOT`` etc. They are the second-order gradients.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from ..dtypes import INT_DTYPES
from ..schema import Attr, Slot, TensorType, schema
from ..shapes import dims_agree, shapes_agree
from .activation import COMPUTE, ONNX, OUTPUT_SLOPES

PARAMS = {"lstm": ("X", "W", "R", "WB", "RB", "H0", "C0"), "gru": ("X", "W", "R", "WB", "RB", "H0")}
"""Each cell's differentiable inputs, in slot order (X, W, R required)."""

OUTPUTS = {"lstm": ("Y", "H", "C"), "gru": ("Y", "H")}
"""Each cell's outputs: every step's h, and the final states."""

GATES = {"lstm": 4, "gru": 3}

class GateActivation(NamedTuple):
    """One of ONNX's LSTM/GRU activations, written once for both engines: ``value(xp, x, alpha, beta)``, and
    ``slope(xp, y, v, alpha, beta)``, its derivative written in its output ``y`` (``v``: y's plain value, for
    the masks of piecewise slopes), which the numpy recurrence's backward and its dual numbers use (xla
    differentiates ``value``). ``defaults``: the (alpha, beta) it reads, ONNX's own operators' defaults."""

    value: Callable
    slope: Callable
    defaults: tuple = ()


def _as_op(op_type: str) -> GateActivation:
    """The activation that is gradgen's op ``op_type``: that op's own ``compute`` and output slope."""
    compute, slope = COMPUTE[op_type], OUTPUT_SLOPES[op_type]
    return GateActivation(lambda xp, x, a, b: compute(xp, x), lambda xp, y, v, a, b: slope(xp, y, v))


OPS_AS_GATES = {ONNX[t]: _as_op(t) for t in OUTPUT_SLOPES}
"""The ONNX activations that are gradgen ops, by ONNX's name (Relu, Sigmoid, ...): each op's own math."""


def _relu_like_slope(xp, y, v, alpha, beta):
    """1 where y > 0, else alpha (LeakyRelu; Relu is alpha 0)."""
    return xp.astype(v > 0, v.dtype) * (1.0 - alpha) + alpha


def _scaled_tanh(plain: GateActivation) -> GateActivation:
    """ONNX's ScaledTanh, alpha t with t = Tanh(beta x) (``plain``: the Tanh gate). Its slope in its output
    y = alpha t is alpha beta (1 - t^2) = (alpha - y^2 / alpha) beta; 0 for alpha 0."""
    def slope(xp, y, v, alpha, beta):
        return 0.0 * y if alpha == 0.0 else (alpha - y * y * (1.0 / alpha)) * beta
    return GateActivation(lambda xp, x, a, b: a * plain.value(xp, b * x, 1.0, 0.0), slope, (1.0, 1.0))


def _elu_slope(xp, y, v, alpha, beta):
    up = xp.astype(v > 0, v.dtype)
    return up + (1.0 - up) * (y + alpha)


def _softsign_slope(xp, y, v, alpha, beta):
    """(1 - |y|)^2, |y| as y times its (constant) sign."""
    one_minus = 1.0 - y * xp.sign(v)
    return one_minus * one_minus


ACTIVATIONS: dict[str, GateActivation] = {
    **{name.lower(): gate for name, gate in OPS_AS_GATES.items()},
    "affine": GateActivation(lambda xp, x, a, b: a * x + b, lambda xp, y, v, a, b: a + 0.0 * y, (1.0, 0.0)),
    "leakyrelu": GateActivation(lambda xp, x, a, b: xp.where(x >= 0, x, a * x), _relu_like_slope, (0.01,)),
    "thresholdedrelu": GateActivation(lambda xp, x, a, b: xp.where(x >= a, x, 0.0),
                                      lambda xp, y, v, a, b: xp.astype(v != 0, v.dtype), (1.0,)),
    "scaledtanh": _scaled_tanh(OPS_AS_GATES["Tanh"]),
    "hardsigmoid": GateActivation(lambda xp, x, a, b: xp.clip(a * x + b, 0.0, 1.0),
                                  lambda xp, y, v, a, b: xp.astype((v > 0) & (v < 1), v.dtype) * a, (0.2, 0.5)),
    "elu": GateActivation(lambda xp, x, a, b: COMPUTE["elu"](xp, x, alpha=a), _elu_slope, (1.0,)),
    "softsign": GateActivation(lambda xp, x, a, b: x / (1.0 + xp.abs(x)), _softsign_slope),
}
"""ONNX's activations for LSTM/GRU by lowercase name (names match without regard to case). Those gradgen has as
ops take that op's ``compute`` and output slope (``OPS_AS_GATES``); ONNX gives ScaledTanh no defaults, gradgen
takes alpha = beta = 1 (plain Tanh)."""

DEFAULT_ACTIVATIONS = {"lstm": ("Sigmoid", "Tanh", "Tanh"), "gru": ("Sigmoid", "Tanh")}
"""Each cell's activations when none are given, as ONNX's LSTM and GRU name their defaults: LSTM f (gates),
g (cell input), h (cell output); GRU f, g."""


def default_activations(cell: str) -> list[str]:
    """The cell's default activations as the op's attr holds names: lowercase."""
    return [name.lower() for name in DEFAULT_ACTIVATIONS[cell]]


_INVERTIBLE = ("leakyrelu", "elu")
"""Activations whose slope the backward reads from their output, which needs alpha >= 0."""
_REQUIRED = ("X", "W", "R")
_FLOATS = ("float32", "float64")


def grad_slot(slot: str) -> str:
    return f"{slot}@GRAD"


def tangent_slot(slot: str) -> str:
    return f"{slot}@DOT"


def activations(cell: str, attrs) -> list[tuple[str, float, float]]:
    """The op's activations as (name, alpha, beta), defaults filled in (``attrs``: the op's attrs by name).

    ``activations`` is empty (the cell's defaults) or one name per activation of the cell; ``activation_alpha``
    and ``activation_beta`` are empty (each activation's defaults) or one value per activation (ignored by an
    activation that reads none). Raises ValueError on anything else."""
    names = [n.lower() for n in attrs.get("activations") or []] or default_activations(cell)
    if len(names) != len(DEFAULT_ACTIVATIONS[cell]) or any(n not in ACTIVATIONS for n in names):
        raise ValueError(f"activations must be {len(DEFAULT_ACTIVATIONS[cell])} names out of {sorted(ACTIVATIONS)} "
                         f"(the {cell}'s {', '.join(DEFAULT_ACTIVATIONS[cell])} by default), got {names}")
    params = []
    for k, attr in enumerate(("activation_alpha", "activation_beta")):
        given = list(attrs.get(attr) or [])
        if given and len(given) != len(names):
            raise ValueError(f"{attr} must be empty or one value per activation ({len(names)}), got {given}")
        params.append([float(given[j]) if given else (ACTIVATIONS[n].defaults + (0.0, 0.0))[k]
                       for j, n in enumerate(names)])
    for n, a in zip(names, params[0]):
        if n in _INVERTIBLE and a < 0:
            raise ValueError(f"{n} with alpha {a} < 0 is not supported (its gradient is read from its output)")
    return list(zip(names, *params))


def _check(ctx, cell: str) -> dict[str, TensorType]:
    """Check the forward inputs' shapes against each other; the output types by output slot."""
    try:
        activations(cell, {a: ctx.attr(a) for a in ("activations", "activation_alpha", "activation_beta")})
    except ValueError as e:
        ctx.fail(str(e))
    x, w, r = ctx.input("X"), ctx.input("W"), ctx.input("R")
    if len(x.shape) != 3 or len(w.shape) != 2 or len(r.shape) != 2:
        ctx.fail(f"X must be [steps, batch, inputs], W [{GATES[cell]}*hidden, inputs], R [{GATES[cell]}*hidden, "
                 f"hidden]; got {list(x.shape)}, {list(w.shape)}, {list(r.shape)}")
    steps, batch, width = x.shape[0], x.shape[1], r.shape[1]
    rows = GATES[cell] * width if width != -1 else -1
    if not (dims_agree(r.shape[0], rows) and dims_agree(w.shape[0], r.shape[0]) and dims_agree(w.shape[1], x.shape[2])):
        ctx.fail(f"W must be [{GATES[cell]}*hidden, inputs] and R [{GATES[cell]}*hidden, hidden] with X's inputs "
                 f"{x.shape[2]}; got W {list(w.shape)}, R {list(r.shape)}")
    expect = {"WB": (r.shape[0],), "RB": (r.shape[0],), "H0": (batch, width), "C0": (batch, width),
              "SeqLens": (batch,)}
    for slot, shape in expect.items():
        for t in ctx.inputs(slot):
            if not shapes_agree(t.shape, shape):
                ctx.fail(f"{slot} must be shaped {list(shape)}, got {list(t.shape)}")
    state = TensorType((batch, width), x.dtype)
    return {"Y": TensorType((steps, batch, width), x.dtype), "H": state, "C": state}


def _given(ctx, cell: str, slots) -> dict[str, TensorType]:
    return {s: ctx.input(s) for s in slots if ctx.has_input(s)}


def _infer_forward(cell: str):
    def infer(ctx):
        types = _check(ctx, cell)
        return {o: types[o] for o in OUTPUTS[cell]}
    return infer


def _check_like(ctx, pairs) -> None:
    for slot, want in pairs:
        for t in ctx.inputs(slot):
            if not shapes_agree(t.shape, want.shape):
                ctx.fail(f"{slot} must be shaped {list(want.shape)}, got {list(t.shape)}")


def _infer_grad(cell: str):
    def infer(ctx):
        types = _check(ctx, cell)
        _check_like(ctx, [(grad_slot(o), types[o]) for o in OUTPUTS[cell]])
        return {grad_slot(p): t for p, t in _given(ctx, cell, PARAMS[cell]).items()}
    return infer


def _infer_jvp(cell: str):
    def infer(ctx):
        types = _check(ctx, cell)
        given = _given(ctx, cell, PARAMS[cell])
        _check_like(ctx, [(grad_slot(o), types[o]) for o in OUTPUTS[cell]]
                    + [(tangent_slot(grad_slot(o)), types[o]) for o in OUTPUTS[cell]]
                    + [(tangent_slot(p), t) for p, t in given.items()])
        return {**{tangent_slot(o): types[o] for o in OUTPUTS[cell]},
                **{tangent_slot(grad_slot(p)): t for p, t in given.items()}}
    return infer


def _slots(names, required=()) -> list[Slot]:
    return [Slot(n, optional=n not in required) for n in names]


def _attrs(cell: str) -> dict[str, Attr]:
    extra = {"linear_before_reset": Attr("bool", True)} if cell == "gru" else {}
    return {"is_reverse": Attr("bool", False), **extra, "activations": Attr("strs", []),
            "activation_alpha": Attr("floats", []), "activation_beta": Attr("floats", [])}


def _dtypes(slots) -> dict:
    return {s: (_FLOATS if s == "X" else INT_DTYPES if s == "SeqLens" else "X") for s in slots}


_EQUATIONS = {
    "lstm": "i, f, o = F of the input, forget and output blocks of X_t W^T + WB + h R^T + RB, g = G of its cell "
            "block (the blocks in the order i, f, g, o); c' = f c + i g; h' = o H(c')",
    "gru": "r, z = F of the reset and update blocks of X_t W^T + WB + h R^T + RB; n = G(X_t W_n^T + WB_n + "
           "r (h R_n^T + RB_n)) with linear_before_reset (PyTorch's GRU), else G(X_t W_n^T + WB_n + (r h) R_n^T + "
           "RB_n); h' = (1 - z) n + z h",
}
"""Each cell's step, its activations F, G (, H) as ONNX's f, g (, h)."""


def _schemas(cell: str) -> tuple:
    params, outs = PARAMS[cell], OUTPUTS[cell]
    inputs = [*params, "SeqLens"]
    grad_inputs = [*inputs, *map(grad_slot, outs)]
    jvp_inputs = [*inputs, *map(tangent_slot, params), *map(grad_slot, outs),
                  *(tangent_slot(grad_slot(o)) for o in outs)]
    return (
        schema(cell, _slots(inputs, _REQUIRED), list(outs), _infer_forward(cell), _attrs(cell),
               doc=f"A {cell.upper()} layer's one direction over a time-major sequence, fused: {_EQUATIONS[cell]}. "
                   "Y holds every step's h, the other outputs the final states; absent initial states are zero. "
                   f"activations (ONNX's names in any case: F, G{', H' if cell == 'lstm' else ''}) replace "
                   f"the defaults {', '.join(DEFAULT_ACTIVATIONS[cell])}, activation_alpha/_beta their "
                   "parameters (one per activation, ONNX's defaults when empty). "
                   "is_reverse walks each sequence from its end; SeqLens (per batch entry) stops a sequence "
                   "early: its later steps output zero and keep its state, their X not read.",
               dtypes=_dtypes(inputs)),
        schema(f"{cell}_grad", _slots(grad_inputs, _REQUIRED), _slots(map(grad_slot, params)), _infer_grad(cell),
               _attrs(cell), doc=f"{cell}'s gradients of <Y@GRAD, Y> plus the final states' given gradients, in "
                                 "each given input, by backpropagation through time (the forward recomputed).",
               dtypes=_dtypes(grad_inputs)),
        schema(f"{cell}_jvp", _slots(jvp_inputs, _REQUIRED),
               _slots([*map(tangent_slot, outs), *(tangent_slot(grad_slot(p)) for p in params)]), _infer_jvp(cell),
               _attrs(cell), doc=f"Forward mode through {cell}: each output's tangent (<out>@DOT) when the inputs "
                                 f"move by <in>@DOT, and the tangent of each of {cell}_grad's outputs when also "
                                 "its output gradients move by <out>@GRAD@DOT (absent tangents are zero).",
               dtypes=_dtypes(jvp_inputs)),
    )


SCHEMAS = (*_schemas("lstm"), *_schemas("gru"))

__all__ = ["SCHEMAS", "PARAMS", "OUTPUTS", "GATES", "ACTIVATIONS", "GateActivation", "DEFAULT_ACTIVATIONS",
           "OPS_AS_GATES", "activations", "default_activations", "grad_slot", "tangent_slot"]
