"""Tangents of ``call`` and ``custom_gradient``.

- ``call``: a ``call`` of a copy of the block with forward mode run inside,
  the inputs' tangents bound to new parameters.
- ``custom_gradient``: the user gave the vector-Jacobian product
  ``dx = G(x, out, dout)``, linear in ``dout``. Its transpose in ``dout``,
  applied to the inputs' tangents, is the Jacobian-vector product that
  rule implies: ``dout_k = d/d dout_k sum_j <G_j(x, out, dout), dx_j>``
  (``op.transposed_block`` builds that backward pass over a copy of the
  gradient body). So both modes follow the user's rule, not the forward
  body's derivative, and agree with each other exactly.
"""
from __future__ import annotations

from gradgen.program.dtypes import is_float

from ..tangent_rules import tangent_rule, zeros_for_missing


def _spread(values: list, positions: list[int], size: int) -> list:
    spread = [None] * size
    for k, value in zip(positions, values):
        spread[k] = value
    return spread


@tangent_rule("call", emits=("call", "fill_zeros_like"))
def call_tangent(g, op):
    xs, x_tangents, params = op.inputs("X"), op.tangents("X"), op.attr("params")
    seeds = [(n, t) for n, t in zip(op.inputs("Input"), op.tangents("Input")) if t is not None]
    moving = [k for k, x in enumerate(xs) if is_float(op.dtype(x))]
    outs = op.outputs("Out")
    floats = [k for k, o in enumerate(outs) if is_float(op.dtype(o))]
    if not floats or (not seeds and all(x_tangents[k] is None for k in moving)):
        return {}
    idx, extra, tangents = op.tangent_block(op.attr("block"), [op.attr("outs")[k] for k in floats], seeds,
                                            carried=[params[k] for k in moving])
    bound = list(xs) + zeros_for_missing(g, [xs[k] for k in moving], [x_tangents[k] for k in moving])
    made = g.op("call", {"X": bound, "Input": op.reads([idx])},
                {"block": idx, "params": list(params) + extra, "outs": tangents}, outputs={"Out": len(floats)})["Out"]
    return {"Out": _spread(made, floats, len(outs))}


@tangent_rule("custom_gradient", emits=("call", "fill_zeros_like"))
def custom_gradient_tangent(g, op):
    xs, x_tangents, outs = op.inputs("X"), op.tangents("X"), op.outputs("Out")
    if all(t is None for t in x_tangents):
        return {}
    n_x, n_out = len(xs), len(outs)
    params = list(op.attr("grad_params"))
    floats = [k for k, o in enumerate(outs) if is_float(op.dtype(o))]
    idx, tangents = op.transposed_block(op.attr("grad_block"), op.attr("grad_outs"), x_tangents,
                                        [params[n_x + n_out + k] for k in floats])
    bound = list(xs) + list(outs) + [g.fill_zeros_like(o) for o in outs]  # the map is linear: any dout will do
    made = g.op("call", {"X": bound, "Input": op.reads([idx])},
                {"block": idx, "params": params, "outs": tangents}, outputs={"Out": len(floats)})["Out"]
    return {"Out": _spread(made, floats, n_out)}


__all__ = ["call_tangent", "custom_gradient_tangent"]
