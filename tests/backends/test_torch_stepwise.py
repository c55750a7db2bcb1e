"""The recurrences ATen's fused calls do not run as the reference does, on the torch engine step by step with the
cells' shared math (``backend/torch/kernels/recurrence.py``), against the numpy reference: the LSTM in float64, with
sequence lengths and with ONNX's other activations; ONNX's GRU without ``linear_before_reset`` and
with other activations; both directions, biases and initial states given or not, each cotangent absent in turn,
zero steps, an empty batch, no input features; NaN, the infinities, 3e38 and -0 in every input and output gradient
(the GRU's gradient of a non-finite output gradient runs step by step: autograd's gave NaN for the reference's
infinities); ``layers.lstm`` with lengths trained alike. Only the tangent ops are refused."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.program.ops.recurrent import OUTPUTS, PARAMS, grad_slot, tangent_slot
from tests.backends.test_torch_recurrent import _compare, _cotangents, _grad_case
from tests.framework.op_harness import Case
from tests.recurrent.cases import GRU_ACTIVATIONS, LSTM_ACTIVATIONS, activation_attrs, inputs

SHAPES = [(4, 3, 3, 2), (1, 1, 2, 3), (0, 2, 3, 2), (3, 0, 2, 2), (3, 2, 0, 2)]
"""(steps, batch, features, hidden): a general one, one step of batch 1, zero steps, an empty batch, no features."""

CASES = [  # (cell, dtype, extra attrs, lengths for a batch of 3 or None)
    ("lstm", "float64", {}, None), ("lstm", "float32", {}, [4, 0, 2]),
    ("lstm", "float64", activation_attrs(*LSTM_ACTIVATIONS[0]), [1, 4, 3]),
    ("lstm", "float32", activation_attrs(*LSTM_ACTIVATIONS[1]), None),
    ("lstm", "float32", activation_attrs(*LSTM_ACTIVATIONS[2]), None),
    ("gru", "float32", {"linear_before_reset": False}, None),
    ("gru", "float64", {"linear_before_reset": False}, [2, 4, 0]),
    *[("gru", "float32", {"linear_before_reset": bool(k % 2), **activation_attrs(*a)}, [3, 1, 4] if k % 2 else None)
      for k, a in enumerate(GRU_ACTIVATIONS)],
]


def _feed(cell: str, shape, dtype: str, attrs: dict, lens, reverse: bool, full: bool, seed: int):
    ins = inputs(cell, *shape, seed=seed, dtype="float64", bias=full, initial=full)
    ins = {k: v.astype(dtype) for k, v in ins.items()}
    if lens is not None and shape[1] == 3:
        ins["SeqLens"] = np.array(lens, np.int32)
    return ins, {"is_reverse": reverse, **attrs}


@pytest.mark.parametrize("reverse,full", [(False, True), (True, False), (True, True)], ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{'+'.join(c[2].get('activations', []))}"
                         f"-{'lbr' if c[2].get('linear_before_reset', True) else 'onnx'}-{c[3]}")
def test_the_layer_and_its_gradient_match_numpy(case, shape, reverse, full):
    cell, dtype, attrs, lens = case
    seed = sum(shape) + 3 * reverse + full
    ins, attrs = _feed(cell, shape, dtype, attrs, lens, reverse, full, seed)
    _compare(Case(cell, ins, None, attrs))
    rng = np.random.default_rng(seed)
    for absent in (None, *OUTPUTS[cell]):  # each cotangent absent (zero) in turn
        _compare(_grad_case(ins, attrs, _cotangents(ins, rng, absent, cell), cell))


SPECIAL = [np.nan, np.inf, -np.inf, 3e38, -0.0]
"""NaN, the infinities, a value near float32's largest and -0."""


@pytest.mark.parametrize("value", SPECIAL, ids=str)
@pytest.mark.parametrize("cell,attrs,lens", [("lstm", {}, [4, 0, 2]), ("gru", {"linear_before_reset": False}, None),
                                             ("gru", {}, None), ("gru", {}, [3, 1, 4])], ids=str)
@pytest.mark.parametrize("slot", ["X", "W", "R", "WB", "RB", "H0", "Y@GRAD", "H@GRAD"])
def test_a_special_value_in_any_input_gives_the_references_numbers(slot, cell, attrs, lens, value):
    """One element of one input or output gradient NaN, infinite, near float32's end or -0, forward, gradient and
    tangents, the reference's numbers exactly (non-finite entries alike): ATen's GRU with a non-finite output
    gradient among them, whose gradient runs step by step."""
    ins, attrs = _feed(cell, (4, 3, 3, 2), "float32", attrs, lens, slot == "R", True, 3)
    cots = _cotangents(ins, np.random.default_rng(4), None, cell)
    arrays = {**ins, **cots}
    arrays[slot] = arrays[slot].copy()
    arrays[slot].reshape(-1)[arrays[slot].size // 2] = value
    given = {k: v for k, v in arrays.items() if k in ins}
    if not slot.endswith("@GRAD"):
        _compare(Case(cell, given, None, attrs))
    _compare(_grad_case(given, attrs, {k: arrays[k] for k in cots}, cell))
    params = [p for p in PARAMS[cell] if p in ins]
    dots = {tangent_slot(p): np.random.default_rng(5).standard_normal(ins[p].shape).astype("float32") for p in params}
    outs = {**{tangent_slot(o): 1 for o in OUTPUTS[cell]}, **{tangent_slot(grad_slot(p)): 1 for p in params}}
    _compare(Case(f"{cell}_jvp", {**arrays, **dots}, None, attrs, outs))


def test_a_gradient_naming_some_of_its_inputs_gives_those():
    ins, attrs = _feed("lstm", (4, 3, 3, 3), "float64", {}, None, False, True, 1)
    cots = _cotangents(ins, np.random.default_rng(2), None, "lstm")
    for wanted in (["R"], ["W", "C0"], ["X"]):
        _compare(Case("lstm_grad", {**ins, **cots}, None, attrs, {grad_slot(p): 1 for p in wanted}))
    assert set(PARAMS["lstm"]) >= {"R", "W", "C0", "X"}


@pytest.mark.parametrize("reverse,full", [(False, True), (True, False)], ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("case", [("lstm", "float32", {}, None), ("lstm", "float64", {}, [4, 0, 2]),
                                  *CASES[3:5], ("gru", "float32", {}, None), ("gru", "float64", {}, [3, 1, 4]),
                                  *CASES[6:]],
                         ids=lambda c: f"{c[0]}-{c[1]}-{'+'.join(c[2].get('activations', []))}"
                         f"-{'lbr' if c[2].get('linear_before_reset', True) else 'onnx'}-{c[3]}")
def test_the_tangent_op_matches_numpy(case, shape, reverse, full):
    """``lstm_jvp``/``gru_jvp``: the outputs' tangents and the gradients' tangents (the second order), the
    forward and backward on dual numbers as the reference's; some tangents and cotangents absent."""
    cell, dtype, attrs, lens = case
    seed = 5 * sum(shape) + reverse + full
    ins, attrs = _feed(cell, shape, dtype, attrs, lens, reverse, full, seed)
    rng = np.random.default_rng(seed)
    params = [p for p in PARAMS[cell] if p in ins]
    dots = {tangent_slot(p): rng.standard_normal(ins[p].shape).astype(dtype) for p in params[reverse:]}
    cots = _cotangents(ins, rng, "Y" if reverse else None, cell)
    cot_dots = {tangent_slot(k): rng.standard_normal(v.shape).astype(dtype) for k, v in cots.items()}
    outs = {**{tangent_slot(o): 1 for o in OUTPUTS[cell][reverse:]}, **{tangent_slot(grad_slot(p)): 1 for p in params}}
    _compare(Case(f"{cell}_jvp", {**ins, **dots, **cots, **cot_dots}, None, attrs, outs))
