"""ONNX ``LSTM`` and ``GRU`` -> one fused ``lstm``/``gru`` op per direction.

ONNX stacks the directions along a leading axis of every weight, state and output, and orders the gates
differently from gradgen (which keeps PyTorch's order): LSTM i, o, f, c against gradgen's i, f, c(g), o; GRU
z, r, h against r, z, n. Each direction's weights are sliced out of the ONNX tensors and their gate blocks
gathered into gradgen's order by ops, so the ONNX initializers stay the program's parameters (a fine-tuning
step updates them as the original model's would). Batch-major ``layout=1`` is transposed to time-major and
back. ONNX's activations (``activations`` lists f, g(, h) for the forward direction, then the reverse; each
activation that reads an alpha or beta takes the next one of ``activation_alpha``/``activation_beta``, ONNX's
default when the list runs out) become each direction's op attrs, one alpha and beta per activation; ``clip``,
``input_forget`` and non-zero peepholes are refused by name.
"""
from __future__ import annotations

import numpy as np

from gradgen.program.ops.recurrent import ACTIVATIONS, DEFAULT_ACTIVATIONS, GATES, activations, default_activations

from .errors import NotImportable

ONNX_GATE_BLOCKS = {"lstm": [0, 2, 3, 1], "gru": [1, 0, 2]}
"""For each gradgen gate block in order, the ONNX gate block it comes from."""

ONNX_ACTIVATION_NAMES = {n.lower(): n for n in ("Relu", "Tanh", "Sigmoid", "Affine", "LeakyRelu", "ThresholdedRelu",
                                                 "ScaledTanh", "HardSigmoid", "Elu", "Softsign", "Softplus")}
"""gradgen's activation names (ONNX's, lowercase) -> ONNX's spelling."""


def gate_rows(cell: str, hidden: int, offset: int = 0) -> np.ndarray:
    """The ONNX rows (from ``offset``) that make gradgen's gate-ordered rows."""
    return np.concatenate([np.arange(b * hidden, (b + 1) * hidden) + offset for b in ONNX_GATE_BLOCKS[cell]])


def direction_activations(ctx, cell: str, dirs: int) -> list[dict]:
    """Each direction's activation attrs for the op ({} for the defaults), from the node's attrs."""
    names = [(a.decode() if isinstance(a, bytes) else a).lower() for a in ctx.attr("activations", [])]
    count = len(DEFAULT_ACTIVATIONS[cell])
    if not names:
        names = default_activations(cell) * dirs
    unknown = [n for n in names if n not in ACTIVATIONS]
    if unknown or len(names) != count * dirs:
        raise NotImportable(f"activations {names}: ONNX's {cell.upper()} takes {count * dirs} names out of "
                            f"{sorted(ONNX_ACTIVATION_NAMES.values())} for {dirs} direction(s)")
    given = [iter(ctx.attr("activation_alpha", []) or []), iter(ctx.attr("activation_beta", []) or [])]
    params = [[], []]
    for n in names:  # each activation takes the next value of each list it reads
        defaults = ACTIVATIONS[n].defaults
        for k in range(2):
            params[k].append(float(next(given[k], defaults[k])) if k < len(defaults) else 0.0)
    out = []
    for d in range(dirs):
        part = slice(d * count, (d + 1) * count)
        attrs = {"activations": names[part], "activation_alpha": params[0][part], "activation_beta": params[1][part]}
        if attrs["activations"] == default_activations(cell):
            out.append({})
            continue
        try:
            activations(cell, attrs)
        except ValueError as e:
            raise NotImportable(str(e)) from None
        out.append(attrs)
    return out


def onnx_activation_attrs(acts: list[tuple[str, float, float]]) -> dict:
    """ONNX's ``activations``/``activation_alpha``/``activation_beta`` for one direction's (name, alpha, beta)."""
    alphas = [a for n, a, _ in acts if len(ACTIVATIONS[n].defaults) > 0]
    betas = [b for n, _, b in acts if len(ACTIVATIONS[n].defaults) > 1]
    out = {"activations": [ONNX_ACTIVATION_NAMES[n] for n, _, _ in acts]}
    return {**out, **({"activation_alpha": alphas} if alphas else {}), **({"activation_beta": betas} if betas else {})}


def _check_attrs(ctx, cell: str) -> None:
    for attr, default in (("clip", None), ("input_forget", 0)):
        if ctx.attr(attr, default) != default:
            raise NotImportable(f"attr {attr}={ctx.attr(attr)} is not supported (only {attr}={default})")
    if cell == "lstm" and ctx.has(7) and not (ctx.is_const(7) and not ctx.const(7).any()):
        raise NotImportable("peephole weights P are not supported (only absent or all zero)")


def _direction(ctx, v: str, d: int) -> str:
    """Direction ``d`` of ONNX tensor ``v`` (its leading axis dropped)."""
    part = ctx.tmp("slice", {"X": v}, {"axes": [0], "starts": [d], "ends": [d + 1]})
    return ctx.tmp("squeeze", {"X": part}, {"axes": [0]})


def _gathered(ctx, v: str, rows: np.ndarray, name: str) -> str:
    index = ctx.importer.constant_var(name, rows.astype(np.int64))
    return ctx.tmp("gather", {"X": v, "Index": index}, {"axis": 0})


def _translate(cell: str):
    def translate(ctx):
        if len(ctx.node.input) < 3 or not all(ctx.node.input[:3]):
            raise NotImportable(f"{cell.upper()} needs its inputs X, W and R; the node has {list(ctx.node.input)}")
        for k, name in ((0, "X"), (1, "W"), (2, "R")):
            if len(ctx.shape(k)) != 3:
                raise NotImportable(f"{cell.upper()}'s {name} must have rank 3, not {list(ctx.shape(k))}")
        direction = ctx.attr("direction", "forward")
        if direction not in ("forward", "reverse", "bidirectional"):
            raise NotImportable(f"direction '{direction}'")
        dirs = 2 if direction == "bidirectional" else 1
        _check_attrs(ctx, cell)
        acts = direction_activations(ctx, cell, dirs)
        hidden = int(ctx.attr("hidden_size", 0)) or ctx.shape(2)[-1]
        if hidden <= 0:
            raise NotImportable("hidden_size is not given and R's last dim is unknown")
        batch_major = bool(ctx.attr("layout", 0))
        major = lambda v, perm: ctx.tmp("transpose", {"X": v}, {"perm": perm}) if batch_major else v  # noqa: E731
        x = major(ctx.x(0), [1, 0, 2])
        rows, state_inputs = gate_rows(cell, hidden), {"lstm": {"H0": 5, "C0": 6}, "gru": {"H0": 5}}[cell]
        lbr = {"linear_before_reset": bool(ctx.attr("linear_before_reset", 0))} if cell == "gru" else {}
        outs = []
        for d in range(dirs):
            inputs = {"X": x, "W": _gathered(ctx, _direction(ctx, ctx.x(1), d), rows, f"{cell}_rows"),
                      "R": _gathered(ctx, _direction(ctx, ctx.x(2), d), rows, f"{cell}_rows")}
            if ctx.has(3):
                b = _direction(ctx, ctx.x(3), d)
                inputs["WB"] = _gathered(ctx, b, rows, f"{cell}_rows")
                inputs["RB"] = _gathered(ctx, b, gate_rows(cell, hidden, GATES[cell] * hidden), f"{cell}_rows")
            if ctx.has(4):
                inputs["SeqLens"] = ctx.x(4)
            inputs.update({slot: _direction(ctx, major(ctx.x(k), [1, 0, 2]), d)
                           for slot, k in state_inputs.items() if ctx.has(k)})
            reverse = direction == "reverse" or d == 1
            outs.append(ctx.op(cell, inputs, {"is_reverse": reverse, **lbr, **acts[d]}))
        wanted = [k for k in range(len(ctx.node.output)) if ctx.node.output[k]]
        for k in wanted:
            slot = ("Y", "H", "C")[k]
            parts = [ctx.tmp("unsqueeze", {"X": o[slot][0]}, {"axes": [1 if k == 0 else 0]}) for o in outs]
            if not batch_major:
                ctx.out("concat", {"X": parts}, {"axis": 1 if k == 0 else 0}, k=k)
                continue
            joined = ctx.tmp("concat", {"X": parts}, {"axis": 1 if k == 0 else 0})
            ctx.out("transpose", {"X": joined}, {"perm": [2, 0, 1, 3] if k == 0 else [1, 0, 2]}, k=k)
    return translate


lstm = _translate("lstm")
gru = _translate("gru")

__all__ = ["lstm", "gru", "gate_rows", "direction_activations", "onnx_activation_attrs", "ONNX_GATE_BLOCKS",
           "ONNX_ACTIVATION_NAMES"]
